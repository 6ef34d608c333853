//! Speaks TLS (HTTP/1.1 or HTTP/2) to the webhook listener, plain HTTP to the probe listener,
//! and HTTPS with an optional bearer token or plain HTTP to the metrics listener, reporting
//! which certificate the server presented.
//!
//! Every connection does a full handshake, so an answer always shows the certificate served
//! at that moment; the client never pools or resumes. The metrics client trusts any
//! certificate, as a ServiceMonitor with `insecureSkipVerify` does (the operator's metrics
//! certificate is self-signed outside OpenShift), but still checks the handshake's
//! signatures.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::pki;

/// The name the client checks the server's certificate against (and sends as SNI).
pub const SERVER_NAME: &str = "localhost";

/// Why a request got no answer. Each message names the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The TCP connection or the TLS handshake failed.
    #[error("TLS: {0}")]
    Connect(std::io::Error),
    /// The HTTP/1.1 or HTTP/2 handshake over the connection failed.
    #[error("{protocol} handshake: {error}")]
    Handshake {
        /// `http/1.1` or `h2`.
        protocol: &'static str,
        /// What hyper said.
        error: hyper::Error,
    },
    /// The request could not be built (a path that is not a URI).
    #[error("cannot build the request: {0}")]
    Build(http::Error),
    /// The request was sent but no response came back.
    #[error("request: {0}")]
    Send(hyper::Error),
    /// The response's body could not be read to its end.
    #[error("body: {0}")]
    Body(hyper::Error),
}

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
    ///
    /// # Panics
    /// If the body is not JSON; the message shows it.
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
    server_name: String,
}

impl TlsClient {
    /// Trusts `ca_pem`, offers `http/1.1` only.
    ///
    /// # Panics
    /// As [`TlsClient::with_alpn`].
    pub fn new(address: SocketAddr, ca_pem: &str) -> TlsClient {
        TlsClient::with_alpn(address, ca_pem, &[b"http/1.1"])
    }

    /// Trusts `ca_pem`, offers `alpn` (nothing when empty).
    ///
    /// # Panics
    /// If `ca_pem` holds a certificate rustls cannot read or use as a trust anchor.
    pub fn with_alpn(address: SocketAddr, ca_pem: &str, alpn: &[&[u8]]) -> TlsClient {
        let roots = trust_anchors(ca_pem);
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|error| panic!("ring offers no safe TLS version: {error}"))
        .with_root_certificates(roots)
        .with_no_client_auth();
        TlsClient::with_config(address, config, alpn)
    }

    /// Trusts any certificate the server presents (as `insecureSkipVerify`), offers
    /// `http/1.1`: for the metrics listener's self-signed certificate.
    ///
    /// # Panics
    /// If ring offers no safe TLS version, which it always does.
    pub fn trusting_any_certificate(address: SocketAddr) -> TlsClient {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap_or_else(|error| panic!("ring offers no safe TLS version: {error}"))
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth();
        TlsClient::with_config(address, config, &[b"http/1.1"])
    }

    fn with_config(
        address: SocketAddr,
        mut config: rustls::ClientConfig,
        alpn: &[&[u8]],
    ) -> TlsClient {
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        // A resumed session carries no certificate (rustls would report the cached one).
        config.resumption = rustls::client::Resumption::disabled();
        TlsClient {
            connector: TlsConnector::from(Arc::new(config)),
            address,
            server_name: SERVER_NAME.to_string(),
        }
    }

    /// The same client, verifying the server's certificate for `name` (SNI and the name
    /// checked) instead of [`SERVER_NAME`]: a Service's `NAME.NAMESPACE.svc`, say.
    pub fn with_server_name(mut self, name: &str) -> TlsClient {
        self.server_name = name.to_string();
        self
    }

    /// The serial of the certificate the server presents in a handshake (no request is
    /// sent), or `None` when the handshake fails (the certificate not trusted, for one).
    pub async fn served_serial(&self) -> Option<String> {
        let stream = self.connect().await.ok()?;
        let (_, connection) = stream.get_ref();
        Some(pki::serial_of(connection.peer_certificates()?.first()?))
    }

    /// Opens a TLS connection.
    pub async fn connect(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let name = ServerName::try_from(self.server_name.clone()).map_err(|error| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} is not a server name: {error}", self.server_name),
            )
        })?;
        let tcp = TcpStream::connect(self.address).await?;
        self.connector.connect(name, tcp).await
    }

    /// POSTs `body` to `path` over a new HTTP/1.1 connection.
    pub async fn post(&self, path: &str, body: impl Into<Bytes>) -> Result<Answer, RequestError> {
        self.request(Method::POST, path, body.into()).await
    }

    /// `GET path` over a new HTTP/1.1 connection, with `Authorization: Bearer TOKEN` when a
    /// token is given.
    pub async fn get(&self, path: &str, token: Option<&str>) -> Result<Answer, RequestError> {
        let authorization = token.map(|token| format!("Bearer {token}"));
        self.send(Method::GET, path, Bytes::new(), authorization.as_deref())
            .await
    }

    /// Sends one request over a new connection, HTTP/2 when that was negotiated.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<Answer, RequestError> {
        self.send(method, path, body, None).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
        authorization: Option<&str>,
    ) -> Result<Answer, RequestError> {
        let tls = self.connect().await.map_err(RequestError::Connect)?;
        let (_, connection) = tls.get_ref();
        let presented = connection.peer_certificates().unwrap_or_default();
        let serial = presented
            .first()
            .map(|der| pki::serial_of(der))
            .unwrap_or_default();
        let chain_length = presented.len();
        let alpn = connection.alpn_protocol().map(<[u8]>::to_vec);
        let mut request = Request::builder()
            .method(method)
            .uri(format!("https://{SERVER_NAME}{path}"))
            .header("content-type", "application/json");
        if let Some(authorization) = authorization {
            request = request.header("authorization", authorization);
        }
        let request = request.body(Full::new(body)).map_err(RequestError::Build)?;
        let response = if alpn.as_deref() == Some(b"h2") {
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|error| RequestError::Handshake {
                        protocol: "h2",
                        error,
                    })?;
            tokio::spawn(connection);
            sender.send_request(request).await
        } else {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|error| RequestError::Handshake {
                    protocol: "http/1.1",
                    error,
                })?;
            tokio::spawn(connection);
            sender.send_request(request).await
        }
        .map_err(RequestError::Send)?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(RequestError::Body)?
            .to_bytes();
        Ok(Answer {
            status,
            body,
            serial,
            chain_length,
            alpn,
        })
    }

    /// Speaks HTTP/2 with prior knowledge over TLS, whatever ALPN said; returns the status.
    pub async fn h2_prior_knowledge(&self, path: &str) -> Result<u16, RequestError> {
        let tls = self.connect().await.map_err(RequestError::Connect)?;
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .map_err(|error| RequestError::Handshake {
                    protocol: "h2",
                    error,
                })?;
        tokio::spawn(connection);
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("https://{SERVER_NAME}{path}"))
            .body(Full::new(Bytes::from_static(b"{}")))
            .map_err(RequestError::Build)?;
        let response = sender
            .send_request(request)
            .await
            .map_err(RequestError::Send)?;
        Ok(response.status().as_u16())
    }

    /// Opens an HTTP/1.1 connection to send several requests over.
    pub async fn keep_alive(&self) -> Result<KeepAlive, RequestError> {
        let tls = self.connect().await.map_err(RequestError::Connect)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|error| RequestError::Handshake {
                protocol: "http/1.1",
                error,
            })?;
        tokio::spawn(connection);
        Ok(KeepAlive { sender })
    }
}

/// The certificates of `ca_pem` as the trust anchors of a TLS client.
///
/// # Panics
/// If `ca_pem` holds a certificate rustls cannot read or use as a trust anchor.
pub(crate) fn trust_anchors(ca_pem: &str) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.unwrap_or_else(|error| panic!("the CA is not PEM: {error}"));
        roots
            .add(cert)
            .unwrap_or_else(|error| panic!("the CA is not a usable trust anchor: {error}"));
    }
    roots
}

/// Accepts whatever certificate the server presents, but checks that the server holds its
/// key (the handshake's signatures), as a TLS client with verification skipped does.
#[derive(Debug)]
pub(crate) struct AnyCertificate(pub(crate) Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `GET path` over plain HTTP/1.1; returns the status and body.
pub async fn plain_get(address: SocketAddr, path: &str) -> Result<(u16, Bytes), RequestError> {
    let tcp = TcpStream::connect(address)
        .await
        .map_err(RequestError::Connect)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|error| RequestError::Handshake {
            protocol: "http/1.1",
            error,
        })?;
    tokio::spawn(connection);
    let request = Request::builder()
        .uri(path)
        .header("host", SERVER_NAME)
        .body(Full::new(Bytes::new()))
        .map_err(RequestError::Build)?;
    let response = sender
        .send_request(request)
        .await
        .map_err(RequestError::Send)?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(RequestError::Body)?
        .to_bytes();
    Ok((status, body))
}

/// An HTTP/1.1 connection kept open across requests.
pub struct KeepAlive {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl KeepAlive {
    /// POSTs `body` to `path` on this connection; returns the status.
    pub async fn post(&mut self, path: &str, body: Bytes) -> Result<u16, RequestError> {
        self.sender.ready().await.map_err(RequestError::Send)?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("host", SERVER_NAME)
            .header("content-type", "application/json")
            .body(Full::new(body))
            .map_err(RequestError::Build)?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(RequestError::Send)?;
        let status = response.status().as_u16();
        response
            .into_body()
            .collect()
            .await
            .map_err(RequestError::Body)?;
        Ok(status)
    }
}
