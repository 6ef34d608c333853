//! Gives each test process a loopback address of its own, so that a server it starts can
//! listen where another process (an API server's webhook wiring) was told to call it before it
//! started, and again after each restart, with no port picked by binding and releasing it.
//!
//! The address is in 127.128.0.0/10, made of the process id (below 2^22, Linux's largest
//! `pid_max`), so no two live processes share one, and nothing else on the machine listens
//! there. A fixed port on it must lie outside the kernel's ephemeral range
//! (`net.ipv4.ip_local_port_range`), from which every bind to port 0 and every outgoing
//! connection takes its port: then no other socket can be given it either.

use std::net::{Ipv4Addr, SocketAddr};

/// Where the kernel keeps the range that binds to port 0 take their ports from.
const EPHEMERAL_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// This process's own loopback address.
pub fn own_address() -> Ipv4Addr {
    address_of(std::process::id())
}

/// The loopback address of process `pid`.
fn address_of(pid: u32) -> Ipv4Addr {
    let [_, high, middle, low] = pid.to_be_bytes();
    Ipv4Addr::new(127, 128 | (high & 0x3f), middle, low)
}

/// `port` on [`own_address`], for a server whose address must be known before it starts.
///
/// # Errors
/// When the kernel's ephemeral range cannot be read, or holds `port`.
pub fn fixed(port: u16) -> Result<SocketAddr, String> {
    let text = std::fs::read_to_string(EPHEMERAL_RANGE)
        .map_err(|error| format!("cannot read {EPHEMERAL_RANGE}: {error}"))?;
    let (first, last) = parse_range(&text)
        .ok_or_else(|| format!("{EPHEMERAL_RANGE} holds {text:?}, not two ports"))?;
    if (first..=last).contains(&port) {
        return Err(format!(
            "port {port} lies in the kernel's ephemeral range {first}-{last} \
             ({EPHEMERAL_RANGE}), where any bind to port 0 may take it"
        ));
    }
    Ok(SocketAddr::from((own_address(), port)))
}

/// The two ports of `ip_local_port_range`.
fn parse_range(text: &str) -> Option<(u16, u16)> {
    let mut ports = text.split_whitespace().map(str::parse::<u16>);
    match (ports.next(), ports.next(), ports.next()) {
        (Some(Ok(first)), Some(Ok(last)), None) => Some((first, last)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_id_has_an_address_of_its_own_away_from_127_0_0_1() {
        assert_eq!(address_of(1), Ipv4Addr::new(127, 128, 0, 1));
        assert_eq!(address_of(70_000), Ipv4Addr::new(127, 129, 17, 112));
        assert_eq!(address_of(4_194_303), Ipv4Addr::new(127, 191, 255, 255));
        assert_ne!(address_of(65_536), address_of(0));
    }

    #[test]
    fn the_range_is_read_as_two_ports() {
        assert_eq!(parse_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_range("32768"), None);
        assert_eq!(parse_range("a b"), None);
    }

    #[test]
    fn a_port_in_the_ephemeral_range_is_refused() {
        let text = std::fs::read_to_string(EPHEMERAL_RANGE).expect("the range");
        let (first, _) = parse_range(&text).expect("two ports");
        let error = fixed(first).expect_err("in the range");
        assert!(error.contains("ephemeral range"), "{error}");
    }

    #[test]
    fn a_server_listens_on_its_own_address() {
        let listener = std::net::TcpListener::bind((own_address(), 0)).expect("bind");
        let address = listener.local_addr().expect("address");
        std::net::TcpStream::connect(address).expect("connect");
    }
}
