//! Finds free TCP ports on 127.0.0.1, for a process that must listen on a port known in
//! advance (a webhook the API server is wired to, a server measured from its first instant).
//!
//! A port is free when asked; nothing else on a test machine races for it. Where a process can
//! bind port 0 and report its address, prefer that ([`crate::process`] does).

use std::net::TcpListener;

/// A loopback port nothing listens on now.
///
/// # Panics
/// If the system has no free loopback port to give.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("no free port on 127.0.0.1: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_can_be_bound() {
        let port = free_port();
        assert_ne!(port, 0);
        TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
    }
}
