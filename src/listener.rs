//! Binds the operator's TCP listeners and names the server in every error, so that a port in
//! use or a server that stops says which of the webhook, probe and metrics servers it was.

use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::net::TcpListener;

/// Why a server could not start or stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A listener could not be bound.
    #[error("cannot listen on {address} for {server}: {source}")]
    Bind {
        /// Which listener.
        server: &'static str,
        /// Where.
        address: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The TLS configuration was refused.
    #[error("cannot configure TLS: {0}")]
    Tls(#[source] rustls::Error),
    /// A server stopped with an error.
    #[error("the {server} server failed: {source}")]
    Serve {
        /// Which server.
        server: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Binds `ip:port` for `server` (port 0 picks a free port) and logs the address bound.
pub async fn bind(server: &'static str, ip: IpAddr, port: u16) -> Result<TcpListener, ServerError> {
    let address = SocketAddr::new(ip, port);
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ServerError::Bind {
            server,
            address,
            source,
        })?;
    let bound = local_address(server, &listener)?;
    tracing::info!(server, address = %bound, "listening");
    Ok(listener)
}

/// The address `listener` is bound to.
pub fn local_address(
    server: &'static str,
    listener: &TcpListener,
) -> Result<SocketAddr, ServerError> {
    listener
        .local_addr()
        .map_err(|source| ServerError::Serve { server, source })
}

/// Turns a server task's outcome into an error naming the server.
pub fn finished_cleanly(
    server: &'static str,
    result: Result<io::Result<()>, tokio::task::JoinError>,
) -> Result<(), ServerError> {
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(ServerError::Serve { server, source }),
        Err(join) => Err(ServerError::Serve {
            server,
            source: io::Error::other(join.to_string()),
        }),
    }
}
