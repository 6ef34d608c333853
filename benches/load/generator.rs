//! Sends one request body to one path as fast as `concurrency` clients can, over kept-alive
//! HTTP/1.1 connections or over a new TLS connection (full handshake) per request, and records
//! the latency of every request.
//!
//! The clients are hyper's HTTP/1.1 client connections over tokio-rustls, as lean as a client
//! gets, since they share the machine with the server they measure.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How requests travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connections {
    /// Each client opens one connection and sends every request over it.
    KeepAlive,
    /// Each request opens a TCP connection, does a full TLS handshake and closes it.
    PerRequest,
}

impl Connections {
    /// A short name for tables and JSON.
    pub fn label(self) -> &'static str {
        match self {
            Connections::KeepAlive => "keep-alive",
            Connections::PerRequest => "new-tls",
        }
    }
}

/// One load run.
#[derive(Clone, Debug)]
pub struct Load {
    /// Where the server listens.
    pub address: SocketAddr,
    /// The path requested.
    pub path: String,
    /// The body sent.
    pub body: Bytes,
    /// Clients sending at once.
    pub concurrency: usize,
    /// How requests travel.
    pub connections: Connections,
    /// Time spent sending before anything is recorded.
    pub warm_up: Duration,
    /// Time measured.
    pub duration: Duration,
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Requests answered with 200 in the measured window.
    pub requests: u64,
    /// Requests that failed, or were answered with anything but 200.
    pub errors: u64,
    /// The measured window.
    pub elapsed: Duration,
    /// Latency of every answered request, in microseconds, sorted.
    pub latencies_us: Vec<u32>,
}

impl Outcome {
    /// Requests per second.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The latency at quantile `q` (0 to 1), in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        let rank = ((self.latencies_us.len() as f64 * q).ceil() as usize)
            .clamp(1, self.latencies_us.len());
        f64::from(self.latencies_us[rank - 1]) / 1000.0
    }

    /// The largest latency, in milliseconds.
    pub fn max_ms(&self) -> f64 {
        self.latencies_us
            .last()
            .map_or(0.0, |us| f64::from(*us) / 1000.0)
    }
}

/// A TLS client that trusts one CA, offers ALPN `http/1.1` and never resumes a session, so a
/// new connection always costs a full handshake.
#[derive(Clone)]
pub struct Client {
    connector: TlsConnector,
}

impl Client {
    /// Trusts the CA in `ca_pem`.
    pub fn new(ca_pem: &str) -> Client {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.expect("a PEM CA")).expect("a usable CA");
        }
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.resumption = rustls::client::Resumption::disabled();
        Client {
            connector: TlsConnector::from(Arc::new(config)),
        }
    }

    /// Opens an HTTP/1.1 connection over TLS.
    pub async fn connect(&self, address: SocketAddr) -> Result<SendRequest<Full<Bytes>>, String> {
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
        let name = ServerName::try_from("localhost").expect("a DNS name");
        let tls = self
            .connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP/1.1: {e}"))?;
        tokio::spawn(connection);
        Ok(sender)
    }
}

/// POSTs `body` to `path` and reads the whole answer; returns the status and the body.
pub async fn post(
    sender: &mut SendRequest<Full<Bytes>>,
    path: &str,
    body: Bytes,
) -> Result<(u16, Bytes), String> {
    sender
        .ready()
        .await
        .map_err(|e| format!("connection: {e}"))?;
    let request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok((status, body))
}

/// Runs `load` and returns what it measured. Must be called inside a tokio runtime.
pub async fn run(client: &Client, load: &Load) -> Outcome {
    let start = Instant::now();
    let measure_from = start + load.warm_up;
    let end = measure_from + load.duration;
    let mut workers = Vec::with_capacity(load.concurrency);
    for _ in 0..load.concurrency {
        let client = client.clone();
        let load = load.clone();
        workers.push(tokio::spawn(async move {
            worker(&client, &load, measure_from, end).await
        }));
    }
    let mut outcome = Outcome::default();
    for worker in workers {
        let (latencies, errors) = worker.await.expect("a load worker");
        outcome.requests += latencies.len() as u64;
        outcome.errors += errors;
        outcome.latencies_us.extend(latencies);
    }
    outcome.elapsed = Instant::now().saturating_duration_since(measure_from);
    outcome.latencies_us.sort_unstable();
    outcome
}

/// One client: sends until `end`, records what was sent from `measure_from` on.
async fn worker(
    client: &Client,
    load: &Load,
    measure_from: Instant,
    end: Instant,
) -> (Vec<u32>, u64) {
    let mut latencies = Vec::with_capacity(4096);
    let mut errors = 0u64;
    let mut kept: Option<SendRequest<Full<Bytes>>> = None;
    loop {
        let sent = Instant::now();
        if sent >= end {
            break;
        }
        let answered = async {
            let sender = match (&mut kept, load.connections) {
                (Some(sender), Connections::KeepAlive) => sender,
                (slot, _) => slot.insert(client.connect(load.address).await?),
            };
            let answered = post(sender, &load.path, load.body.clone()).await;
            if load.connections == Connections::PerRequest {
                kept = None;
            }
            answered
        }
        .await;
        let recorded = sent >= measure_from;
        match answered {
            Ok((200, _)) => {
                if recorded {
                    let us = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    latencies.push(us);
                }
            }
            Ok(_) | Err(_) => {
                kept = None;
                if recorded {
                    errors += 1;
                }
            }
        }
    }
    (latencies, errors)
}
