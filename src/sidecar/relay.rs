//! Lets memcached_exporter read the statistics of a server that requires authentication or
//! client certificates, without holding the credentials or the server's key: the
//! `relay-stats` subcommand, run in each memcached pod as a native sidecar when monitoring is
//! on and the server asks for either.
//!
//! memcached_exporter's client has no way to send memcached's ASCII authentication, and would
//! need the Secret's key to present a client certificate. The relay listens on a Unix socket in
//! a volume only it and the exporter mount, so nothing on the network reaches it; the socket
//! is open to every user (mode 0666), since the exporter runs as a user of its own. For each
//! connection it opens one to its own pod's server on loopback (over TLS when the server
//! serves TLS, offering the sidecars' own client certificate when the pod has one: never the
//! server's),
//! authenticates with the auth file's first credentials when it is given one (read anew for
//! every connection, so changed credentials are used from the next scrape on), and then
//! passes on only the commands the exporter sends: `stats`, `stats settings`, `stats slabs`,
//! `stats items`, and `version`. Any other command is answered with a `CLIENT_ERROR` and never
//! reaches the server, so the socket gives no access to the cached items. A client certificate
//! it cannot present stops it with the reason, which its termination message carries to the
//! Memcached's status; every connection that fails otherwise is counted in its metrics
//! (`metrics`), served beside its probes.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use clap::Args;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tracing::{debug, info, warn};

use super::health::{self, Heartbeat};
use super::metrics::{FAILED, RelayMetrics, SUCCEEDED};
use super::session::{self, Files, SessionError};
use crate::listener::ServerError;

/// The container name of the sidecar in memcached pods.
pub const CONTAINER_NAME: &str = "stats-relay";

/// The commands passed on to the server: what memcached_exporter sends, and `version`.
pub const RELAYED_COMMANDS: [&str; 5] = [
    "stats",
    "stats settings",
    "stats slabs",
    "stats items",
    "version",
];

/// The socket's mode: any user may connect (the exporter runs as a user of its own); only
/// the exporter's and the relay's containers mount its directory.
pub const SOCKET_MODE: u32 = 0o666;

/// The longest command line read from a client; the relayed commands are far shorter.
const MAX_COMMAND: u64 = 64;
/// How long the server may take to answer one command.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Flags of `memcached-operator relay-stats`.
#[derive(Args, Debug, Clone)]
pub struct RelayArgs {
    /// The Unix socket to listen on (memcached_exporter's `--memcached.address`).
    #[arg(long)]
    pub listen: PathBuf,

    /// memcached's auth file, when the server requires authentication; its first credentials
    /// authenticate every relayed connection.
    #[arg(long)]
    pub auth_file: Option<PathBuf>,

    /// memcached's client port on the pod's loopback.
    #[arg(long, default_value_t = 11211, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,

    /// The client port serves TLS.
    #[arg(long)]
    pub tls: bool,

    /// Directory of the sidecars' client certificate (`tls.crt`, `tls.key`), presented when
    /// the server asks for one; only with `--tls`.
    #[arg(long, requires = "tls")]
    pub client_cert_dir: Option<PathBuf>,

    /// Port of the kubelet's probes, `/healthz` and `/readyz` (plain HTTP, every address);
    /// without it, none are served.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub health_port: Option<u16>,
}

/// How often the accept loop beats (`health`) while no connection comes.
const BEAT_EVERY: Duration = Duration::from_secs(5);

/// Why the relay stopped.
#[derive(Debug, Error)]
pub enum RelayError {
    /// The sidecars' client certificate cannot be presented, so no statistics can be read.
    #[error("the sidecars' client certificate cannot be used: {0}")]
    ClientCertificate(#[source] SessionError),
    /// The socket could not be made.
    #[error("--listen {path}: {message}")]
    Listen {
        /// The socket's path.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The probes' port cannot be listened on.
    #[error(transparent)]
    Health(#[from] ServerError),
}

/// A connection to the server, TLS or plain.
trait Duplex: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Duplex for T {}

/// Runs until `shutdown` completes: serves every connection to the socket on a task of its
/// own, and the kubelet's probes on `--health-port`.
pub async fn run(
    args: RelayArgs,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<(), RelayError> {
    let listen_failed = |error: std::io::Error| RelayError::Listen {
        path: args.listen.clone(),
        message: error.to_string(),
    };
    // A socket left by an earlier run of this container (a restart keeps the volume).
    match std::fs::remove_file(&args.listen) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(listen_failed(error));
        }
        _ => {}
    }
    let listener = UnixListener::bind(&args.listen).map_err(listen_failed)?;
    std::fs::set_permissions(&args.listen, std::fs::Permissions::from_mode(SOCKET_MODE))
        .map_err(listen_failed)?;
    info!(listen = %args.listen.display(), port = args.port, tls = args.tls, client_certificate = args.client_cert_dir.is_some(), "relaying statistics commands");
    let files = Files {
        client_cert_dir: args.client_cert_dir.clone(),
        auth_file: None,
        port: args.port,
    };
    files
        .client_identity()
        .await
        .map_err(RelayError::ClientCertificate)?;
    let probes = health::listen(args.health_port).await?;
    let heartbeat = Heartbeat::default();
    let (metrics, registry) = RelayMetrics::registered();
    health::beside(
        probes,
        heartbeat.clone(),
        registry,
        accept(&args, listener, &heartbeat, &metrics, shutdown),
    )
    .await
}

/// Accepts connections until `shutdown` completes, beating `heartbeat` every [`BEAT_EVERY`]
/// and after every connection accepted, and counting in `metrics` how each ended.
async fn accept(
    args: &RelayArgs,
    listener: UnixListener,
    heartbeat: &Heartbeat,
    metrics: &RelayMetrics,
    mut shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<(), RelayError> {
    // A connection that finds the client certificate unusable stops the relay with the
    // reason, which the Memcached's status then shows.
    let (unusable, mut stop) = tokio::sync::mpsc::unbounded_channel();
    let mut beats = tokio::time::interval(BEAT_EVERY);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => return Ok(()),
            Some(error) = stop.recv() => return Err(RelayError::ClientCertificate(error)),
            _ = beats.tick() => {
                heartbeat.beat();
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        heartbeat.beat();
        match accepted {
            Ok((client, _)) => {
                let args = args.clone();
                let unusable = unusable.clone();
                let connections = metrics.connections.clone();
                tokio::spawn(async move {
                    let served = serve(client, &args).await;
                    let outcome = if served.is_ok() { SUCCEEDED } else { FAILED };
                    connections.get_or_create(&outcome).inc();
                    match served {
                        Ok(()) => {}
                        Err(ConnectionError::Server(error)) if error.is_client_certificate() => {
                            let _ = unusable.send(error);
                        }
                        Err(error) => warn!(%error, "a relayed connection failed"),
                    }
                });
            }
            Err(error) => warn!(%error, "cannot accept a connection"),
        }
    }
}

/// Why one relayed connection ended early.
#[derive(Debug, Error)]
enum ConnectionError {
    #[error(transparent)]
    Server(#[from] SessionError),
    #[error("{0}")]
    Io(String),
}

/// Relays one client's commands until it closes the connection.
async fn serve(client: UnixStream, args: &RelayArgs) -> Result<(), ConnectionError> {
    let mut server = open(args).await?;
    let io = |what: &str| {
        let what = what.to_string();
        move |error: std::io::Error| ConnectionError::Io(format!("{what}: {error}"))
    };
    let (client_read, mut client_write) = client.into_split();
    let mut client_read = BufReader::new(client_read);
    loop {
        let mut line = String::new();
        let read = (&mut client_read)
            .take(MAX_COMMAND)
            .read_line(&mut line)
            .await
            .map_err(io("reading the client's command"))?;
        if read == 0 {
            return Ok(());
        }
        if !line.ends_with('\n') {
            client_write
                .write_all(b"CLIENT_ERROR line too long\r\n")
                .await
                .map_err(io("answering the client"))?;
            return Ok(());
        }
        let command = line.trim_end();
        if !RELAYED_COMMANDS.contains(&command) {
            debug!(command, "not relayed");
            client_write
                .write_all(b"CLIENT_ERROR not relayed: only statistics commands are\r\n")
                .await
                .map_err(io("answering the client"))?;
            continue;
        }
        server
            .write_all(format!("{command}\r\n").as_bytes())
            .await
            .map_err(io("sending the command to memcached"))?;
        loop {
            let mut reply = Vec::new();
            let read = tokio::time::timeout(REPLY_TIMEOUT, server.read_until(b'\n', &mut reply))
                .await
                .map_err(|_| {
                    ConnectionError::Io(format!(
                        "memcached did not answer {command} within {REPLY_TIMEOUT:?}"
                    ))
                })?
                .map_err(io("reading memcached's reply"))?;
            if read == 0 {
                return Err(ConnectionError::Io(format!(
                    "memcached closed the connection while answering {command}"
                )));
            }
            client_write
                .write_all(&reply)
                .await
                .map_err(io("passing the reply on"))?;
            if ends_reply(&reply) {
                break;
            }
        }
    }
}

/// Whether a reply line is the last of its reply: `END` after statistics, `VERSION` alone, or
/// an error.
fn ends_reply(line: &[u8]) -> bool {
    let line = line.trim_ascii_end();
    line == b"END"
        || line == b"ERROR"
        || line.starts_with(b"VERSION ")
        || line.starts_with(b"CLIENT_ERROR")
        || line.starts_with(b"SERVER_ERROR")
}

/// A connection to the pod's server, authenticated.
async fn open(args: &RelayArgs) -> Result<BufReader<Box<dyn Duplex>>, SessionError> {
    let port = args.port;
    let stream: Box<dyn Duplex> = if args.tls {
        let files = Files {
            client_cert_dir: args.client_cert_dir.clone(),
            auth_file: args.auth_file.clone(),
            port,
        };
        let (stream, _) = session::connect(&files).await?;
        Box::new(stream.into_inner())
    } else {
        Box::new(
            TcpStream::connect(("127.0.0.1", port))
                .await
                .map_err(|error| SessionError::Connection {
                    port,
                    message: format!("cannot connect: {error}"),
                })?,
        )
    };
    let mut stream = BufReader::new(stream);
    if let Some(auth_file) = &args.auth_file {
        let credentials = session::first_credentials(auth_file).await?;
        session::authenticate(&mut stream, port, &credentials).await?;
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_replies_end_at_end_and_errors_end_at_once() {
        assert!(ends_reply(b"END\r\n"));
        assert!(ends_reply(b"VERSION 1.6.18\r\n"));
        assert!(ends_reply(b"CLIENT_ERROR unauthenticated\r\n"));
        assert!(ends_reply(b"SERVER_ERROR out of memory\r\n"));
        assert!(ends_reply(b"ERROR\r\n"));
        assert!(!ends_reply(b"STAT pid 1\r\n"));
        assert!(!ends_reply(b"STAT version 1.6.18\r\n"));
    }

    /// A server that takes one connection: it expects the credentials, then answers `stats`,
    /// and records every other line it receives.
    async fn fake_memcached() -> (u16, tokio::task::JoinHandle<Vec<String>>) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("a connection");
            let mut stream = BufReader::new(stream);
            let mut seen = Vec::new();
            loop {
                let mut line = String::new();
                if stream.read_line(&mut line).await.expect("reads") == 0 {
                    return seen;
                }
                let line = line.trim_end().to_string();
                let reply: &[u8] = if line.starts_with("set auth 0 0 ") {
                    let mut data = String::new();
                    stream.read_line(&mut data).await.expect("reads the data");
                    if data.trim_end() == "user secret" {
                        b"STORED\r\n"
                    } else {
                        b"CLIENT_ERROR authentication failure\r\n"
                    }
                } else if line == "stats" {
                    b"STAT pid 1\r\nSTAT curr_items 3\r\nEND\r\n"
                } else {
                    b"ERROR\r\n"
                };
                seen.push(line);
                stream.get_mut().write_all(reply).await.expect("answers");
            }
        });
        (port, server)
    }

    #[tokio::test]
    async fn a_client_certificate_for_servers_only_stops_the_relay_saying_so() {
        let dir = tempfile::tempdir().expect("a directory");
        let servers_only = testkit::pki::Ca::root().server_only();
        std::fs::write(dir.path().join("tls.crt"), &servers_only.cert_pem).expect("written");
        std::fs::write(dir.path().join("tls.key"), &servers_only.key_pem).expect("written");
        let args = RelayArgs {
            listen: dir.path().join("stats.sock"),
            auth_file: None,
            port: 11211,
            tls: true,
            client_cert_dir: Some(dir.path().to_path_buf()),
            health_port: None,
        };
        let error = run(args, Box::pin(std::future::pending()))
            .await
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains("client certificate cannot be used")
                && error.contains("allows serverAuth, not client authentication"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn statistics_pass_after_the_credentials_and_nothing_else_reaches_the_server() {
        let dir = tempfile::tempdir().expect("a directory");
        let auth_file = dir.path().join("authfile");
        std::fs::write(&auth_file, "user:secret\nother:pass\n").expect("writes the auth file");
        let (port, server) = fake_memcached().await;
        let socket = dir.path().join("stats.sock");
        let args = RelayArgs {
            listen: socket.clone(),
            auth_file: Some(auth_file),
            port,
            tls: false,
            client_cert_dir: None,
            health_port: None,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let relay = tokio::spawn(run(
            args,
            Box::pin(async move {
                let _ = stopped.await;
            }),
        ));
        let client = loop {
            match UnixStream::connect(&socket).await {
                Ok(client) => break client,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let mode = std::fs::metadata(&socket)
            .expect("the socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, SOCKET_MODE, "any user may connect");
        let mut client = BufReader::new(client);
        let mut ask = async |request: &str, lines: usize| {
            client
                .get_mut()
                .write_all(request.as_bytes())
                .await
                .expect("sends");
            let mut reply = String::new();
            for _ in 0..lines {
                client.read_line(&mut reply).await.expect("reads");
            }
            reply
        };
        assert!(
            ask("get secret-key\r\n", 1)
                .await
                .starts_with("CLIENT_ERROR not relayed")
        );
        assert!(
            ask("flush_all\r\n", 1)
                .await
                .starts_with("CLIENT_ERROR not relayed")
        );
        assert_eq!(
            ask("stats\r\n", 3).await,
            "STAT pid 1\r\nSTAT curr_items 3\r\nEND\r\n"
        );
        drop(client);
        let seen = server.await.expect("the server ends");
        assert_eq!(seen, ["set auth 0 0 11", "stats"]);
        let _ = stop.send(());
        relay.await.expect("joins").expect("stops cleanly");
    }

    #[tokio::test]
    async fn without_an_auth_file_statistics_pass_with_no_credentials_sent() {
        let dir = tempfile::tempdir().expect("a directory");
        let (port, server) = fake_memcached().await;
        let socket = dir.path().join("stats.sock");
        let args = RelayArgs {
            listen: socket.clone(),
            auth_file: None,
            port,
            tls: false,
            client_cert_dir: None,
            health_port: None,
        };
        let relay = tokio::spawn(run(args, Box::pin(std::future::pending())));
        let client = loop {
            match UnixStream::connect(&socket).await {
                Ok(client) => break client,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let mut client = BufReader::new(client);
        client
            .get_mut()
            .write_all(b"stats\r\n")
            .await
            .expect("sends");
        let mut reply = String::new();
        for _ in 0..3 {
            client.read_line(&mut reply).await.expect("reads");
        }
        assert_eq!(reply, "STAT pid 1\r\nSTAT curr_items 3\r\nEND\r\n");
        drop(client);
        assert_eq!(server.await.expect("the server ends"), ["stats"]);
        relay.abort();
    }

    #[tokio::test]
    async fn a_socket_path_that_cannot_be_made_stops_the_relay_with_its_name() {
        let args = RelayArgs {
            listen: PathBuf::from("/nonexistent/relay/stats.sock"),
            auth_file: Some(PathBuf::from("/nonexistent/authfile")),
            port: 11211,
            tls: false,
            client_cert_dir: None,
            health_port: None,
        };
        let error = run(args, Box::pin(std::future::pending()))
            .await
            .expect_err("refused");
        assert!(
            error.to_string().contains("/nonexistent/relay/stats.sock"),
            "{error}"
        );
    }
}
