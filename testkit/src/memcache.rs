//! Speaks memcached's ASCII protocol to a server in a pod, as its clients do: over plain TCP or
//! TLS (trusting a given CA, optionally presenting a client certificate), authenticating with
//! memcached's auth-file credentials, setting and getting items, and reading the serial of the
//! certificate the server presents.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::client::trust_anchors;
use crate::pki::{Leaf, serial_of};

/// The variable that has memcached write the ports it listens on to a file (memcached's own
/// test suite starts it so, with `-p -1`: a TCP port of the kernel's choosing).
pub const PORT_FILE_VARIABLE: &str = "MEMCACHED_PORT_FILENAME";

/// The TCP port a memcached started with `-p -1` and [`PORT_FILE_VARIABLE`] set to `file`
/// reports, once it has written the file (it writes it whole, then renames it into place).
pub fn reported_port(file: &std::path::Path) -> Option<u16> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("TCP INET: ")?.trim().parse().ok())
}

/// A directory for memcached's port file ([`PORT_FILE_VARIABLE`]): memcached writes it once it
/// runs as nobody, so anyone may write there.
///
/// # Panics
/// If the directory cannot be made or its mode set.
pub fn port_file_dir() -> tempfile::TempDir {
    dir_with_mode(0o777)
}

/// A directory whose files memcached, switched to nobody, can read.
///
/// # Panics
/// If the directory cannot be made or its mode set.
pub fn readable_dir() -> tempfile::TempDir {
    dir_with_mode(0o755)
}

fn dir_with_mode(mode: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let permissions = std::os::unix::fs::PermissionsExt::from_mode(mode);
    if let Err(error) = std::fs::set_permissions(dir.path(), permissions) {
        panic!(
            "cannot set mode {mode:o} on {}: {error}",
            dir.path().display()
        );
    }
    dir
}

/// How long one exchange with a server may take before it counts as failed: generous, so
/// that only a server that does not answer fails, not a busy machine.
pub const TIMEOUT: Duration = Duration::from_secs(30);

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// How to reach a server over TLS.
#[derive(Clone)]
pub struct Tls {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl Tls {
    /// Trusts `ca_pem` and checks the server's certificate for `server_name`; presents
    /// `client` when given.
    ///
    /// # Panics
    /// If a PEM does not parse, or `server_name` is not a DNS name.
    pub fn new(ca_pem: &str, server_name: &str, client: Option<&Leaf>) -> Tls {
        let roots = trust_anchors(ca_pem);
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|error| panic!("ring offers no safe TLS version: {error}"))
        .with_root_certificates(roots);
        let mut config = match client {
            None => builder.with_no_client_auth(),
            Some(leaf) => {
                let chain = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap_or_else(|error| panic!("the client certificate is not PEM: {error}"));
                let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes())
                    .unwrap_or_else(|error| panic!("the client key is not PEM: {error}"));
                builder
                    .with_client_auth_cert(chain, key)
                    .unwrap_or_else(|error| panic!("rustls refuses the client key: {error}"))
            }
        };
        config.resumption = rustls::client::Resumption::disabled();
        Tls {
            connector: TlsConnector::from(Arc::new(config)),
            server_name: ServerName::try_from(server_name.to_string())
                .unwrap_or_else(|error| panic!("{server_name:?} is not a server name: {error}")),
        }
    }
}

/// A connection to one memcached server.
pub struct Connection {
    stream: BufReader<Box<dyn Stream>>,
    /// The serial of the certificate the server presented, over TLS.
    pub serial: Option<String>,
}

impl Connection {
    /// Connects to `address`, over TLS when `tls` is given; the error names what failed (the
    /// TCP connection or the handshake).
    pub async fn open(address: SocketAddr, tls: Option<&Tls>) -> Result<Connection, String> {
        let tcp = tokio::time::timeout(TIMEOUT, TcpStream::connect(address))
            .await
            .map_err(|_| format!("connecting to {address} timed out"))?
            .map_err(|error| format!("cannot connect to {address}: {error}"))?;
        let Some(tls) = tls else {
            return Ok(Connection {
                stream: BufReader::new(Box::new(tcp)),
                serial: None,
            });
        };
        let stream =
            tokio::time::timeout(TIMEOUT, tls.connector.connect(tls.server_name.clone(), tcp))
                .await
                .map_err(|_| format!("the TLS handshake with {address} timed out"))?
                .map_err(|error| format!("the TLS handshake with {address} failed: {error}"))?;
        let serial = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|cert| serial_of(cert));
        // Under TLS 1.3 the server judges a client certificate after the client's side of the
        // handshake has ended: a refusal shows on the first exchange, not here.
        Ok(Connection {
            stream: BufReader::new(Box::new(stream)),
            serial,
        })
    }

    /// Sends `request` and reads one reply line (or, for `get`, up to `END`); the error names
    /// a closed connection or a timeout.
    pub async fn command(&mut self, request: &str) -> Result<String, String> {
        let exchange = async {
            self.stream
                .get_mut()
                .write_all(request.as_bytes())
                .await
                .map_err(|error| format!("cannot send {request:?}: {error}"))?;
            self.stream
                .get_mut()
                .flush()
                .await
                .map_err(|error| format!("cannot send {request:?}: {error}"))?;
            let mut reply = String::new();
            loop {
                let mut line = String::new();
                let read = self
                    .stream
                    .read_line(&mut line)
                    .await
                    .map_err(|error| format!("no reply to {request:?}: {error}"))?;
                if read == 0 {
                    return Err(format!(
                        "the server closed the connection after {request:?} (read {reply:?})"
                    ));
                }
                reply.push_str(&line);
                let multi_line = request.starts_with("get ") || request.starts_with("stats");
                if !multi_line || line == "END\r\n" || line.contains("ERROR") {
                    return Ok(reply);
                }
            }
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no reply to {request:?} within {TIMEOUT:?}"))?
    }

    /// Authenticates with memcached's auth-file credentials (a `set` whose data is
    /// `user password`); returns the server's answer (`STORED` when they are accepted).
    pub async fn authenticate(&mut self, user: &str, password: &str) -> Result<String, String> {
        let data = format!("{user} {password}");
        self.command(&format!("set auth 0 0 {}\r\n{data}\r\n", data.len()))
            .await
    }

    /// Sets `key` to `value`; returns the server's answer (`STORED`).
    pub async fn set(&mut self, key: &str, value: &str) -> Result<String, String> {
        self.command(&format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()))
            .await
    }

    /// The value of `key`, or `None` when the server has no such item.
    pub async fn get(&mut self, key: &str) -> Result<Option<String>, String> {
        let reply = self.command(&format!("get {key}\r\n")).await?;
        let mut lines = reply.split("\r\n");
        match lines.next() {
            Some("END") => Ok(None),
            Some(header) if header.starts_with("VALUE ") => Ok(lines.next().map(str::to_string)),
            _ => Err(format!("get {key}: unexpected reply {reply:?}")),
        }
    }
}
