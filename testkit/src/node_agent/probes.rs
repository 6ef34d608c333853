//! Runs readiness, liveness and startup probes the way the kubelet does: what to run
//! (`httpGet`, `tcpSocket`, `exec`) against the pod's IP, when (`initialDelaySeconds`,
//! `periodSeconds`, `timeoutSeconds`), and how results add up (`successThreshold`,
//! `failureThreshold`).
//!
//! HTTP probes send a plain HTTP/1.1 GET and count 200-399 as success; HTTPS probes are not
//! supported and fail with a message saying so. Exec probes are started by the pod worker
//! through `sandbox::exec_in`, since they need the container's image and namespace.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a probe does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeAction {
    /// GET `path` from `address` with `headers`.
    Http {
        /// Where.
        address: SocketAddr,
        /// The path and query.
        path: String,
        /// The Host header.
        host: String,
        /// Extra headers.
        headers: Vec<(String, String)>,
    },
    /// An HTTPS GET, which the agent cannot do.
    Https,
    /// Open a TCP connection.
    Tcp(SocketAddr),
    /// Run a command in the container.
    Exec(Vec<String>),
}

/// Why a probe is malformed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProbeError {
    /// A named port the container does not declare.
    #[error("container {container:?}: probe port {port:?} is not one of its ports")]
    Port {
        /// The container.
        container: String,
        /// The port name or number.
        port: String,
    },
    /// No handler at all.
    #[error("container {container:?}: probe has no httpGet, tcpSocket or exec")]
    NoHandler {
        /// The container.
        container: String,
    },
}

/// A probe's timings, with the API's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// Before the first run.
    pub initial_delay: Duration,
    /// Between runs.
    pub period: Duration,
    /// How long one run may take.
    pub timeout: Duration,
    /// Successes in a row that make it pass.
    pub success_threshold: u32,
    /// Failures in a row that make it fail.
    pub failure_threshold: u32,
}

impl Timings {
    /// The timings of `probe` (defaults 0 s, 10 s, 1 s, 1, 3).
    pub fn of(probe: &Probe) -> Timings {
        let seconds = |v: Option<i32>, default: u64| {
            Duration::from_secs(v.map(|v| v.max(0) as u64).unwrap_or(default))
        };
        Timings {
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: seconds(probe.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: seconds(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
            success_threshold: probe.success_threshold.unwrap_or(1).max(1) as u32,
            failure_threshold: probe.failure_threshold.unwrap_or(3).max(1) as u32,
        }
    }
}

/// Results of one probe over time: the kubelet's worker counting runs in a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeTracker {
    timings: Timings,
    passing: bool,
    successes: u32,
    failures: u32,
}

impl ProbeTracker {
    /// A tracker starting at `initial` (false for readiness and startup, true for liveness).
    pub fn new(timings: Timings, initial: bool) -> ProbeTracker {
        ProbeTracker {
            timings,
            passing: initial,
            successes: 0,
            failures: 0,
        }
    }

    /// Counts one run; returns whether the probe passes now.
    pub fn record(&mut self, success: bool) -> bool {
        if success {
            self.successes += 1;
            self.failures = 0;
            if self.successes >= self.timings.success_threshold {
                self.passing = true;
            }
        } else {
            self.failures += 1;
            self.successes = 0;
            if self.failures >= self.timings.failure_threshold {
                self.passing = false;
            }
        }
        self.passing
    }

    /// Whether the probe passes.
    pub fn passing(&self) -> bool {
        self.passing
    }

    /// Its timings.
    pub fn timings(&self) -> Timings {
        self.timings
    }
}

/// What `probe` of `container` does, against `pod_ip`.
pub fn action(
    probe: &Probe,
    container: &Container,
    pod_ip: IpAddr,
) -> Result<ProbeAction, ProbeError> {
    let port = |port: &IntOrString| -> Result<u16, ProbeError> {
        let error = || ProbeError::Port {
            container: container.name.clone(),
            port: match port {
                IntOrString::Int(n) => n.to_string(),
                IntOrString::String(s) => s.clone(),
            },
        };
        match port {
            IntOrString::Int(n) => u16::try_from(*n).map_err(|_| error()),
            IntOrString::String(name) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(error),
        }
    };
    if let Some(http) = &probe.http_get {
        if http.scheme.as_deref() == Some("HTTPS") {
            return Ok(ProbeAction::Https);
        }
        let ip = http
            .host
            .as_deref()
            .and_then(|h| h.parse().ok())
            .unwrap_or(pod_ip);
        let number = port(&http.port)?;
        let address = SocketAddr::new(ip, number);
        let mut headers = Vec::new();
        let mut host = address.to_string();
        for header in http.http_headers.iter().flatten() {
            if header.name.eq_ignore_ascii_case("host") {
                host = header.value.clone();
            } else {
                headers.push((header.name.clone(), header.value.clone()));
            }
        }
        let path = http.path.clone().unwrap_or_else(|| "/".to_string());
        let path = if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        return Ok(ProbeAction::Http {
            address,
            path,
            host,
            headers,
        });
    }
    if let Some(tcp) = &probe.tcp_socket {
        let ip = tcp
            .host
            .as_deref()
            .and_then(|h| h.parse().ok())
            .unwrap_or(pod_ip);
        return Ok(ProbeAction::Tcp(SocketAddr::new(ip, port(&tcp.port)?)));
    }
    if let Some(exec) = &probe.exec {
        return Ok(ProbeAction::Exec(exec.command.clone().unwrap_or_default()));
    }
    Err(ProbeError::NoHandler {
        container: container.name.clone(),
    })
}

/// Runs an HTTP or TCP probe once; true on success. Exec and HTTPS are not run here.
pub async fn run_network(action: &ProbeAction, timeout: Duration) -> bool {
    let attempt = async {
        match action {
            ProbeAction::Tcp(address) => TcpStream::connect(address).await.is_ok(),
            ProbeAction::Http {
                address,
                path,
                host,
                headers,
            } => http_get(*address, path, host, headers)
                .await
                .is_some_and(|code| (200..400).contains(&code)),
            ProbeAction::Https | ProbeAction::Exec(_) => false,
        }
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or(false)
}

async fn http_get(
    address: SocketAddr,
    path: &str,
    host: &str,
    headers: &[(String, String)],
) -> Option<u16> {
    let mut stream = TcpStream::connect(address).await.ok()?;
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: kube-probe/node-agent\r\nAccept: */*\r\nConnection: close\r\n"
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < 12 {
        let n = stream.read(&mut head[read..]).await.ok()?;
        if n == 0 {
            break;
        }
        read += n;
    }
    status_code(&head[..read])
}

/// The status code of an HTTP/1.x status line.
pub fn status_code(head: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(head.get(..12)?).ok()?;
    let rest = text.strip_prefix("HTTP/1.")?;
    rest.get(2..5)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction};

    fn timings(success: u32, failure: u32) -> Timings {
        Timings {
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    #[test]
    fn a_readiness_probe_passes_after_enough_successes_and_fails_after_enough_failures() {
        let mut tracker = ProbeTracker::new(timings(2, 2), false);
        assert!(!tracker.record(true));
        assert!(tracker.record(true));
        assert!(tracker.record(false));
        assert!(!tracker.record(false));
    }

    #[test]
    fn a_named_http_port_resolves_against_the_container_ports() {
        let container = Container {
            name: "main".into(),
            ports: Some(vec![ContainerPort {
                name: Some("health".into()),
                container_port: 8081,
                ..ContainerPort::default()
            }]),
            ..Container::default()
        };
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/readyz".into()),
                port: IntOrString::String("health".into()),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        let ip: IpAddr = "127.0.100.2".parse().unwrap();
        let ProbeAction::Http { address, path, .. } = action(&probe, &container, ip).unwrap()
        else {
            panic!("not an HTTP probe");
        };
        assert_eq!(address, "127.0.100.2:8081".parse().unwrap());
        assert_eq!(path, "/readyz");
        let mut bad = probe.clone();
        bad.http_get.as_mut().unwrap().port = IntOrString::String("nope".into());
        assert_eq!(
            action(&bad, &container, ip).unwrap_err().to_string(),
            "container \"main\": probe port \"nope\" is not one of its ports"
        );
    }

    #[test]
    fn the_status_code_is_read_from_the_status_line() {
        assert_eq!(status_code(b"HTTP/1.1 204 No Content\r\n"), Some(204));
        assert_eq!(status_code(b"garbage"), None);
    }

    #[test]
    fn defaults_are_the_apis() {
        let t = Timings::of(&Probe::default());
        assert_eq!(
            t,
            Timings {
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(10),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 3,
            }
        );
    }
}
