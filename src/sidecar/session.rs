//! One exchange with the pod's own memcached over TLS: the certificate it presents,
//! `refresh_certs`, and what tells its process from the next one (`stats`). Each exchange is a fresh connection, offering the sidecars' own client
//! certificate, read anew from its files, when the pod has one: never the server's.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::client::ResolvesClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, SignatureScheme};
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::api::auth_file::{self, Credentials};
use crate::api::v1beta1::{TLS_CERT_KEY, TLS_KEY_KEY};
use crate::tls::certs::{CertError, CertPaths, load_pair};

use super::trust::Life;

/// How long one exchange may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Where a sidecar finds what it presents to the pod's own server.
#[derive(Clone, Debug)]
pub struct Files {
    /// The directory of the sidecars' client certificate (`tls.crt`, `tls.key`), when the
    /// server asks for client certificates and the pod has one: never the server's own.
    pub client_cert_dir: Option<PathBuf>,
    /// memcached's auth file, when authentication is on.
    pub auth_file: Option<PathBuf>,
    /// memcached's TLS port on loopback.
    pub port: u16,
}

/// Why an exchange failed.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The certificate files could not be read or do not make a pair.
    #[error(transparent)]
    Files(#[from] CertError),
    /// The auth file could not be read or holds no credentials.
    #[error("auth file {path}: {message}")]
    AuthFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The connection or the handshake failed.
    #[error("memcached on 127.0.0.1:{port}: {message}")]
    Connection {
        /// The port.
        port: u16,
        /// What failed.
        message: String,
    },
    /// The client certificate does not allow client authentication: memcached (OpenSSL)
    /// refuses it as a client's.
    #[error(
        "{}: its extended key usage allows {usages}, not client authentication (clientAuth); \
         memcached refuses it as a client certificate: issue the sidecars' certificate for \
         client authentication",
        .path.display()
    )]
    NotForClients {
        /// The certificate file.
        path: PathBuf,
        /// What the certificate allows.
        usages: String,
    },
    /// memcached answered something other than what was asked for.
    #[error("memcached answered {command} with {reply:?}")]
    Refused {
        /// The command.
        command: &'static str,
        /// Its reply.
        reply: String,
    },
}

impl SessionError {
    /// Whether the sidecars' client certificate is what failed (unreadable, not a pair, or
    /// not for clients): nothing a retry mends, only a changed Secret.
    pub fn is_client_certificate(&self) -> bool {
        matches!(
            self,
            SessionError::Files(_) | SessionError::NotForClients { .. }
        )
    }
}

impl Files {
    /// The sidecars' client certificate and key on disk, checked to make a pair and to allow
    /// client authentication; `None` when the pod has none.
    pub async fn client_identity(&self) -> Result<Option<Arc<CertifiedKey>>, SessionError> {
        let Some(dir) = &self.client_cert_dir else {
            return Ok(None);
        };
        let paths = CertPaths {
            cert: dir.join(TLS_CERT_KEY),
            key: dir.join(TLS_KEY_KEY),
        };
        let cert = read(&paths.cert).await?;
        let key = read(&paths.key).await?;
        let pair = load_pair(&paths, &cert, &key, &provider())?;
        for_clients(&paths.cert, &pair.key)?;
        Ok(Some(pair.key))
    }

    /// The auth file's first credentials, as memcached reads them (`user:password`).
    async fn credentials(&self) -> Result<Option<Credentials>, SessionError> {
        match &self.auth_file {
            Some(path) => first_credentials(path).await.map(Some),
            None => Ok(None),
        }
    }
}

/// A file's bytes, or an error naming it.
pub async fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    tokio::fs::read(path)
        .await
        .map_err(|error| CertError::Unreadable {
            path: path.to_path_buf(),
            message: error.to_string(),
        })
}

/// Refuses a leaf whose extended key usage leaves out client authentication, as OpenSSL's
/// check of a client certificate's purpose does (no such extension allows every use).
fn for_clients(path: &Path, key: &CertifiedKey) -> Result<(), SessionError> {
    let Some(leaf) = key.cert.first() else {
        return Ok(());
    };
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(leaf) else {
        return Ok(());
    };
    let usage = match parsed.extended_key_usage() {
        Ok(Some(usage)) => usage.value,
        _ => return Ok(()),
    };
    if usage.any || usage.client_auth {
        return Ok(());
    }
    let mut usages: Vec<String> = [
        (usage.server_auth, "serverAuth"),
        (usage.code_signing, "codeSigning"),
        (usage.email_protection, "emailProtection"),
        (usage.time_stamping, "timeStamping"),
        (usage.ocsp_signing, "OCSPSigning"),
    ]
    .into_iter()
    .filter(|(allowed, _)| *allowed)
    .map(|(_, name)| name.to_string())
    .collect();
    usages.extend(usage.other.iter().map(ToString::to_string));
    Err(SessionError::NotForClients {
        path: path.to_path_buf(),
        usages: if usages.is_empty() {
            "nothing".into()
        } else {
            usages.join(", ")
        },
    })
}

/// The first credentials of memcached's auth file, read as memcached reads it; a file the
/// operator refuses (`api::auth_file::check`) is an error saying why.
pub async fn first_credentials(path: &Path) -> Result<Credentials, SessionError> {
    let bad = |message: String| SessionError::AuthFile {
        path: path.to_path_buf(),
        message,
    };
    let content = tokio::fs::read(path)
        .await
        .map_err(|error| bad(error.to_string()))?;
    let entries = auth_file::check(&content).map_err(|refusal| bad(refusal.to_string()))?;
    entries
        .into_iter()
        .next()
        .ok_or_else(|| bad(auth_file::Refusal::Empty.to_string()))
}

fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// The serial of the certificate the server presents now.
pub async fn presented_certificate(files: &Files) -> Result<String, SessionError> {
    let (_, serial) = connect(files).await?;
    Ok(serial)
}

/// A fresh connection to the server, authenticated with the auth file's first credentials
/// when there are some.
async fn authenticated(files: &Files) -> Result<Stream, SessionError> {
    let (mut stream, _) = connect(files).await?;
    if let Some(credentials) = files.credentials().await? {
        authenticate(&mut stream, files.port, &credentials).await?;
    }
    Ok(stream)
}

/// Sends `refresh_certs` (after the credentials, when there are some) and expects `OK`.
pub async fn refresh(files: &Files) -> Result<(), SessionError> {
    let mut stream = authenticated(files).await?;
    let reply = exchange(
        &mut stream,
        files.port,
        "refresh_certs",
        b"refresh_certs\r\n",
    )
    .await?;
    if reply != "OK" {
        return Err(SessionError::Refused {
            command: "refresh_certs",
            reply,
        });
    }
    Ok(())
}

/// What the server's `stats` say of its memcached process (after the credentials, when there
/// are some): see [`Life`].
pub async fn server_life(files: &Files) -> Result<Life, SessionError> {
    let mut stream = authenticated(files).await?;
    let mut line = exchange(&mut stream, files.port, "stats", b"stats\r\n").await?;
    let (mut time, mut uptime, mut connections) = (None, None, None);
    let (mut user, mut system) = (None, None);
    // `STAT name value` lines, then `END`; the line cap guards against an endless answer.
    for _ in 0..1024 {
        if line == "END" {
            break;
        }
        let mut words = line.split(' ');
        match (words.next(), words.next(), words.next()) {
            (Some("STAT"), Some("time"), Some(value)) => time = value.parse::<i64>().ok(),
            (Some("STAT"), Some("uptime"), Some(value)) => uptime = value.parse::<i64>().ok(),
            (Some("STAT"), Some("total_connections"), Some(value)) => {
                connections = value.parse::<u64>().ok();
            }
            (Some("STAT"), Some("rusage_user"), Some(value)) => user = micros(value),
            (Some("STAT"), Some("rusage_system"), Some(value)) => system = micros(value),
            (Some("STAT"), _, _) => {}
            _ => {
                return Err(SessionError::Refused {
                    command: "stats",
                    reply: line,
                });
            }
        }
        line = read_line(&mut stream, files.port, "stats").await?;
    }
    match (time, uptime, connections, user, system) {
        (Some(time), Some(uptime), Some(connections), Some(user), Some(system)) => Ok(Life {
            started: time - uptime,
            connections,
            cpu_micros: user.saturating_add(system),
        }),
        _ => Err(SessionError::Refused {
            command: "stats",
            reply: "no time, uptime, total_connections, rusage_user or rusage_system".into(),
        }),
    }
}

/// `SECONDS.FRACTION` (memcached's rusage) in microseconds.
fn micros(value: &str) -> Option<u64> {
    let (seconds, fraction) = value.split_once('.').unwrap_or((value, "0"));
    let digits: String = fraction
        .chars()
        .chain(std::iter::repeat('0'))
        .take(6)
        .collect();
    seconds
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000_000)?
        .checked_add(digits.parse().ok()?)
}

/// Authenticates a fresh connection as memcached's ASCII protocol does: a `set` whose data is
/// `user password`, answered with `STORED`.
pub async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut BufReader<S>,
    port: u16,
    credentials: &Credentials,
) -> Result<(), SessionError> {
    let mut data = credentials.user.clone();
    data.push(b' ');
    data.extend_from_slice(&credentials.password);
    let mut request = format!("set auth 0 0 {}\r\n", data.len()).into_bytes();
    request.extend_from_slice(&data);
    request.extend_from_slice(b"\r\n");
    let reply = exchange(stream, port, "authentication", &request).await?;
    if reply != "STORED" {
        return Err(SessionError::Refused {
            command: "authentication",
            reply,
        });
    }
    Ok(())
}

/// Sends one request and reads the one line that answers it.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut BufReader<S>,
    port: u16,
    command: &'static str,
    request: &[u8],
) -> Result<String, SessionError> {
    stream
        .write_all(request)
        .await
        .map_err(|error| SessionError::Connection {
            port,
            message: format!("cannot send {command}: {error}"),
        })?;
    read_line(stream, port, command).await
}

/// Reads one line of the answer to `command`.
async fn read_line<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut BufReader<S>,
    port: u16,
    command: &'static str,
) -> Result<String, SessionError> {
    let failed = |message: String| SessionError::Connection { port, message };
    let mut reply = String::new();
    tokio::time::timeout(TIMEOUT, stream.read_line(&mut reply))
        .await
        .map_err(|_| failed(format!("no reply to {command} within {TIMEOUT:?}")))?
        .map_err(|error| failed(format!("no reply to {command}: {error}")))?;
    Ok(reply.trim_end().to_string())
}

/// A TLS connection to the pod's own server.
pub type Stream = BufReader<tokio_rustls::client::TlsStream<TcpStream>>;

/// A TLS connection to the server, and the serial of the certificate it presented. The
/// sidecars' client certificate, when the pod has one, is offered when the server asks for
/// one; otherwise none is.
pub async fn connect(files: &Files) -> Result<(Stream, String), SessionError> {
    let port = files.port;
    let failed = |message: String| SessionError::Connection { port, message };
    let identity = files.client_identity().await?;
    let provider = Arc::new(provider());
    let presented = Arc::new(Mutex::new(None));
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| failed(error.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Recorder {
            provider,
            presented: presented.clone(),
        }));
    let mut config = match identity {
        Some(key) => builder.with_client_cert_resolver(Arc::new(Offer(key))),
        None => builder.with_no_client_auth(),
    };
    config.resumption = rustls::client::Resumption::disabled();
    let connecting = async {
        let tcp = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|error| failed(format!("cannot connect: {error}")))?;
        TlsConnector::from(Arc::new(config))
            .connect(ServerName::from(std::net::Ipv4Addr::LOCALHOST), tcp)
            .await
            .map_err(|error| failed(format!("TLS handshake: {error}")))
    };
    let stream = tokio::time::timeout(TIMEOUT, connecting)
        .await
        .map_err(|_| failed(format!("no TLS session within {TIMEOUT:?}")))??;
    let serial = presented
        .lock()
        .map_err(|_| failed("the handshake's record is poisoned".into()))?
        .take()
        .ok_or_else(|| failed("the server presented no certificate".into()))?;
    Ok((BufReader::new(stream), serial))
}

/// Takes any certificate the server presents, records its serial, and checks that the server
/// holds its key: the refresher compares what is served with the file, it does not judge trust
/// (it talks to its own pod over loopback).
#[derive(Debug)]
struct Recorder {
    provider: Arc<CryptoProvider>,
    presented: Arc<Mutex<Option<String>>>,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let (_, parsed) = x509_parser::parse_x509_certificate(end_entity).map_err(|_| {
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
        })?;
        if let Ok(mut presented) = self.presented.lock() {
            *presented = Some(parsed.raw_serial_as_string());
        }
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Offers the sidecars' client certificate whenever the server asks for one.
#[derive(Debug)]
struct Offer(Arc<CertifiedKey>);

impl ResolvesClientCert for Offer {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rusage_seconds_read_as_microseconds() {
        assert_eq!(micros("0.007215"), Some(7_215));
        assert_eq!(micros("12.5"), Some(12_500_000));
        assert_eq!(micros("3"), Some(3_000_000));
        assert_eq!(micros("1.1234567"), Some(1_123_456));
        assert_eq!(micros("-1.0"), None);
        assert_eq!(micros("x"), None);
    }

    fn files_with_auth(text: &str) -> (tempfile::TempDir, Files) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("authfile");
        std::fs::write(&path, text).expect("writes the auth file");
        let files = Files {
            client_cert_dir: None,
            auth_file: Some(path),
            port: 11211,
        };
        (dir, files)
    }

    #[tokio::test]
    async fn the_first_credentials_of_the_auth_file_are_used() {
        let (_dir, files) = files_with_auth("alice:wonder:land\nbob:builder\n");
        assert_eq!(
            files.credentials().await.expect("credentials"),
            Some(Credentials {
                user: b"alice".to_vec(),
                password: b"wonder:land".to_vec(),
            })
        );
    }

    #[tokio::test]
    async fn an_auth_file_memcached_would_refuse_is_an_error_naming_it_and_why() {
        for (text, why) in [
            ("", "holds no credentials"),
            ("no colon here\n", "line 1 has no ':'"),
            // memcached refuses a blank line, so the sidecars do not skip one.
            ("\nalice:wonder\n", "line 1 is blank"),
        ] {
            let (_dir, files) = files_with_auth(text);
            let error = files.credentials().await.expect_err("refused").to_string();
            assert!(error.contains("authfile") && error.contains(why), "{error}");
        }
    }

    fn files_with_client(leaf: &testkit::pki::Leaf) -> (tempfile::TempDir, Files) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).expect("written");
        std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).expect("written");
        let files = Files {
            client_cert_dir: Some(dir.path().to_path_buf()),
            auth_file: None,
            port: 11211,
        };
        (dir, files)
    }

    #[tokio::test]
    async fn missing_certificate_files_are_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let files = Files {
            client_cert_dir: Some(dir.path().to_path_buf()),
            auth_file: None,
            port: 11211,
        };
        let error = files.client_identity().await.expect_err("refused");
        assert!(error.to_string().contains("tls.crt"), "{error}");
    }

    #[tokio::test]
    async fn a_pod_without_a_client_certificate_offers_none() {
        let (_dir, files) = files_with_auth("alice:wonder\n");
        assert!(files.client_identity().await.expect("no error").is_none());
    }

    #[tokio::test]
    async fn a_client_certificate_is_offered_only_if_it_allows_client_authentication() {
        let ca = testkit::pki::Ca::root();
        for allowed in [
            ca.client("memcached-sidecars"),
            ca.serving(testkit::pki::KeyForm::EcPkcs8),
        ] {
            let (_dir, files) = files_with_client(&allowed);
            let identity = files.client_identity().await.expect("usable");
            assert!(identity.is_some());
        }
        let (dir, files) = files_with_client(&ca.server_only());
        let error = files
            .client_identity()
            .await
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains(&dir.path().join("tls.crt").display().to_string())
                && error.contains("allows serverAuth, not client authentication"),
            "{error}"
        );
    }
}
