//! Hands out pod IPs from the agent's `--pod-ip-range` (a loopback IPv4 range such as
//! `127.0.100.0/24`): each pod its own address, given back when the pod is gone.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// Why a range is unusable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RangeError {
    /// Not `A.B.C.D/N`.
    #[error("pod IP range {0:?} is not an IPv4 CIDR such as 127.0.100.0/24")]
    Syntax(String),
    /// Not inside 127.0.0.0/8.
    #[error("pod IP range {0:?} is not inside 127.0.0.0/8: pods live on loopback here")]
    NotLoopback(String),
}

/// The addresses of a range and which are in use.
#[derive(Clone, Debug)]
pub struct PodIps {
    first: u32,
    last: u32,
    used: BTreeSet<Ipv4Addr>,
}

impl PodIps {
    /// Parses `A.B.C.D/N`; the network and broadcast addresses are never handed out.
    pub fn parse(range: &str) -> Result<PodIps, RangeError> {
        let syntax = || RangeError::Syntax(range.to_string());
        let (address, bits) = range.split_once('/').ok_or_else(syntax)?;
        let address: Ipv4Addr = address.parse().map_err(|_| syntax())?;
        let bits: u32 = bits.parse().map_err(|_| syntax())?;
        if !(8..=30).contains(&bits) {
            return Err(syntax());
        }
        if address.octets()[0] != 127 {
            return Err(RangeError::NotLoopback(range.to_string()));
        }
        let mask = u32::MAX << (32 - bits);
        let network = u32::from(address) & mask;
        Ok(PodIps {
            first: network + 1,
            last: (network | !mask) - 1,
            used: BTreeSet::new(),
        })
    }

    /// Takes `wanted` if it is in the range and free (a pod that already has an IP keeps it),
    /// else the lowest free address; `None` when the range is full.
    pub fn take(&mut self, wanted: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
        if let Some(ip) = wanted {
            let n = u32::from(ip);
            if (self.first..=self.last).contains(&n) && self.used.insert(ip) {
                return Some(ip);
            }
        }
        let ip = (self.first..=self.last)
            .map(Ipv4Addr::from)
            .find(|ip| !self.used.contains(ip))?;
        self.used.insert(ip);
        Some(ip)
    }

    /// Gives `ip` back.
    pub fn release(&mut self, ip: Ipv4Addr) {
        self.used.remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_handed_out_lowest_first_and_reused_after_release() {
        let mut ips = PodIps::parse("127.0.100.0/30").unwrap();
        let a = ips.take(None).unwrap();
        let b = ips.take(None).unwrap();
        assert_eq!(
            (a, b),
            (Ipv4Addr::new(127, 0, 100, 1), Ipv4Addr::new(127, 0, 100, 2))
        );
        assert_eq!(ips.take(None), None);
        ips.release(a);
        assert_eq!(ips.take(None), Some(a));
    }

    #[test]
    fn a_pod_keeps_the_address_it_already_has() {
        let mut ips = PodIps::parse("127.0.100.0/24").unwrap();
        let kept = Ipv4Addr::new(127, 0, 100, 7);
        assert_eq!(ips.take(Some(kept)), Some(kept));
        assert_eq!(ips.take(Some(kept)), Some(Ipv4Addr::new(127, 0, 100, 1)));
    }

    #[test]
    fn a_range_off_loopback_is_refused() {
        assert_eq!(
            PodIps::parse("10.0.0.0/24").unwrap_err().to_string(),
            "pod IP range \"10.0.0.0/24\" is not inside 127.0.0.0/8: pods live on loopback here"
        );
    }
}
