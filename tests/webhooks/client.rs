//! Speaks TLS (HTTP/1.1 or HTTP/2) to the webhook listener and plain HTTP to the probe and
//! metrics listeners, reporting which certificate the server presented.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::pki;

/// What the server answered, and over what.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Bytes,
    /// The serial number of the certificate the server presented.
    pub serial: String,
    /// How many certificates the server presented.
    pub chain_length: usize,
    /// The ALPN protocol negotiated, if any.
    pub alpn: Option<Vec<u8>>,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

/// A TLS client that trusts one CA and offers the given ALPN protocols.
#[derive(Clone)]
pub struct TlsClient {
    connector: TlsConnector,
    address: SocketAddr,
}

impl TlsClient {
    /// Trusts `ca_pem`, offers `http/1.1` only.
    pub fn new(address: SocketAddr, ca_pem: &str) -> TlsClient {
        TlsClient::with_alpn(address, ca_pem, &[b"http/1.1"])
    }

    /// Trusts `ca_pem`, offers `alpn` (nothing when empty).
    pub fn with_alpn(address: SocketAddr, ca_pem: &str, alpn: &[&[u8]]) -> TlsClient {
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
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        // Every connection does a full handshake, so it shows the certificate served now (a
        // resumed session carries no certificate; rustls would report the cached one).
        config.resumption = rustls::client::Resumption::disabled();
        TlsClient {
            connector: TlsConnector::from(Arc::new(config)),
            address,
        }
    }

    /// Opens a TLS connection.
    pub async fn connect(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(self.address).await?;
        let name = ServerName::try_from("localhost").expect("a DNS name");
        self.connector.connect(name, tcp).await
    }

    /// POSTs `body` to `path` over a new HTTP/1.1 connection.
    pub async fn post(&self, path: &str, body: impl Into<Bytes>) -> Result<Answer, String> {
        self.request(Method::POST, path, body.into()).await
    }

    /// Sends one request over a new connection, HTTP/2 when that was negotiated.
    pub async fn request(&self, method: Method, path: &str, body: Bytes) -> Result<Answer, String> {
        let tls = self.connect().await.map_err(|e| format!("TLS: {e}"))?;
        let (_, connection) = tls.get_ref();
        let presented = connection.peer_certificates().unwrap_or_default();
        let serial = presented
            .first()
            .map(|der| pki::serial_of(der))
            .unwrap_or_default();
        let chain_length = presented.len();
        let alpn = connection.alpn_protocol().map(<[u8]>::to_vec);
        let request = Request::builder()
            .method(method)
            .uri(format!("https://localhost{path}"))
            .header("content-type", "application/json")
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        let response = if alpn.as_deref() == Some(b"h2") {
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|e| format!("h2 handshake: {e}"))?;
            tokio::spawn(connection);
            sender.send_request(request).await
        } else {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| format!("http/1.1 handshake: {e}"))?;
            tokio::spawn(connection);
            sender.send_request(request).await
        }
        .map_err(|e| format!("request: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            body,
            serial,
            chain_length,
            alpn,
        })
    }

    /// Speaks HTTP/2 with prior knowledge over TLS, whatever ALPN said.
    pub async fn h2_prior_knowledge(&self, path: &str) -> Result<u16, String> {
        let tls = self.connect().await.map_err(|e| format!("TLS: {e}"))?;
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .map_err(|e| format!("h2 handshake: {e}"))?;
        tokio::spawn(connection);
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("https://localhost{path}"))
            .body(Full::new(Bytes::from_static(b"{}")))
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("request: {e}"))?;
        Ok(response.status().as_u16())
    }
}

/// `GET path` over plain HTTP/1.1; returns the status and body.
pub async fn plain_get(address: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let tcp = TcpStream::connect(address).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .expect("http/1.1 handshake");
    tokio::spawn(connection);
    let request = Request::builder()
        .uri(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .expect("a request");
    let response = sender.send_request(request).await.expect("a response");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes()
        .to_vec();
    (status, body)
}

/// An HTTP/1.1 connection kept open across requests.
pub struct KeepAlive {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl TlsClient {
    /// Opens an HTTP/1.1 connection to send several requests over.
    pub async fn keep_alive(&self) -> Result<KeepAlive, String> {
        let tls = self.connect().await.map_err(|e| format!("TLS: {e}"))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("http/1.1 handshake: {e}"))?;
        tokio::spawn(connection);
        Ok(KeepAlive { sender })
    }
}

impl KeepAlive {
    /// POSTs `body` to `path` on this connection; returns the status.
    pub async fn post(&mut self, path: &str, body: Bytes) -> Result<u16, String> {
        self.sender
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
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = response.status().as_u16();
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?;
        Ok(status)
    }
}
