//! Which packets a node takes as in-band updates: UDP to the update port at one of the node's
//! own addresses ([`NodeAddresses`]). Building update packets and reading acknowledgements is
//! the client's side: `hotplane_control::inband`.

use hotplane_core::FlowKey;
use std::net::IpAddr;

use crate::config::{Config, PortKind};

/// The node's own addresses on each port. A UDP datagram to the update port is an update only
/// when its destination is one of the addresses of the port it arrived on; anything else to
/// that port number is traffic like any other (transit traffic is forwarded, not swallowed),
/// and acknowledgements leave from the address the update was sent to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAddresses {
    /// Per port (in config order): addresses as a flow key holds them (version, 16 bytes).
    per_port: Vec<Vec<(u8, [u8; 16])>>,
}

impl NodeAddresses {
    /// `addresses[i]` are port i's addresses.
    pub fn new(addresses: &[Vec<IpAddr>]) -> Self {
        let per_port = addresses
            .iter()
            .map(|port| {
                let mut own: Vec<(u8, [u8; 16])> = port.iter().map(|a| key_form(*a)).collect();
                own.sort_unstable();
                own.dedup();
                own
            })
            .collect();
        Self { per_port }
    }

    /// Each port's addresses: `control.update_addresses` (configured; every port) and, for
    /// ports on a Linux interface, the interface's own addresses when the node starts
    /// (learned). An interface whose addresses cannot be read contributes none.
    pub fn of_config(cfg: &Config) -> Self {
        let configured = &cfg.control.update_addresses;
        let ports: Vec<Vec<IpAddr>> = cfg
            .ports
            .iter()
            .map(|p| {
                let interface = match &p.kind {
                    PortKind::Afpacket(s) => Some((s.interface.as_str(), s.netns.as_deref())),
                    PortKind::Afxdp(s) => Some((s.interface.as_str(), s.netns.as_deref())),
                    PortKind::Mem(_) | PortKind::Pcap(_) => None,
                };
                let mut own = configured.clone();
                if let Some((name, netns)) = interface {
                    match interface_addresses(name, netns) {
                        Ok(learned) => own.extend(learned),
                        Err(e) => tracing::warn!(
                            port = p.name(),
                            "cannot read the addresses of {name}: {e}; only control.update_addresses take updates"
                        ),
                    }
                }
                own
            })
            .collect();
        Self::new(&ports)
    }

    /// Is `key` (a classified packet's flow key) addressed to the node on port `in_port`?
    #[inline]
    pub fn is_own(&self, in_port: usize, key: &FlowKey) -> bool {
        self.per_port
            .get(in_port)
            .is_some_and(|own| own.iter().any(|(v, a)| *v == key.ip_version && *a == key.dst))
    }

    /// Port `port`'s addresses.
    pub fn of_port(&self, port: usize) -> Vec<IpAddr> {
        self.per_port.get(port).map_or_else(Vec::new, |own| {
            own.iter()
                .map(|(v, a)| match v {
                    4 => IpAddr::from([a[0], a[1], a[2], a[3]]),
                    _ => IpAddr::from(*a),
                })
                .collect()
        })
    }
}

/// An address as `FlowKey::dst` holds it.
fn key_form(a: IpAddr) -> (u8, [u8; 16]) {
    let mut b = [0u8; 16];
    match a {
        IpAddr::V4(v4) => {
            b[..4].copy_from_slice(&v4.octets());
            (4, b)
        }
        IpAddr::V6(v6) => (6, v6.octets()),
    }
}

/// The IPv4 and IPv6 addresses of interface `name` (inside network namespace `netns`).
pub fn interface_addresses(name: &str, netns: Option<&str>) -> std::io::Result<Vec<IpAddr>> {
    hotplane_io::netns::run_in(netns, || {
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: getifaddrs writes a list head we own to `list` and frees nothing of ours.
        if unsafe { libc::getifaddrs(&mut list) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut out = Vec::new();
        let mut at = list;
        while !at.is_null() {
            // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed.
            let entry = unsafe { &*at };
            at = entry.ifa_next;
            if entry.ifa_addr.is_null() || entry.ifa_name.is_null() {
                continue;
            }
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let entry_name = unsafe { std::ffi::CStr::from_ptr(entry.ifa_name) };
            if entry_name.to_bytes() != name.as_bytes() {
                continue;
            }
            // SAFETY: ifa_addr is non-null and points to a sockaddr whose family says which
            // sockaddr_* it is; each cast below matches its family.
            let family = unsafe { (*entry.ifa_addr).sa_family } as i32;
            match family {
                libc::AF_INET => {
                    // SAFETY: as above, family AF_INET.
                    let sin = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in) };
                    out.push(IpAddr::from(sin.sin_addr.s_addr.to_ne_bytes()));
                }
                libc::AF_INET6 => {
                    // SAFETY: as above, family AF_INET6.
                    let sin6 = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in6) };
                    out.push(IpAddr::from(sin6.sin6_addr.s6_addr));
                }
                _ => {}
            }
        }
        // SAFETY: `list` came from getifaddrs and is freed once, after its last use.
        unsafe { libc::freeifaddrs(list) };
        Ok(out)
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_addresses_match_per_port_and_family() {
        let own = NodeAddresses::new(&[
            vec!["10.0.0.254".parse().unwrap(), "fd00::fe".parse().unwrap()],
            vec![],
        ]);
        let key = |dst: &str| {
            FlowKey::from_ips("10.9.9.9".parse().unwrap(), dst.parse().unwrap(), 17, 1, 47474)
        };
        let key6 = |dst: &str| {
            FlowKey::from_ips("fd00::9".parse().unwrap(), dst.parse().unwrap(), 17, 1, 47474)
        };
        assert!(own.is_own(0, &key("10.0.0.254")));
        assert!(own.is_own(0, &key6("fd00::fe")));
        assert!(!own.is_own(0, &key("10.0.0.253")), "another host");
        assert!(!own.is_own(1, &key("10.0.0.254")), "not this port's address");
        assert!(!own.is_own(7, &key("10.0.0.254")), "no such port");
        // The IPv4-mapped form of the address is a different (IPv6) destination.
        assert!(!own.is_own(0, &key6("::ffff:10.0.0.254")));
        assert_eq!(own.of_port(0).len(), 2);
    }

    #[test]
    fn loopback_addresses_are_learned() {
        let lo = interface_addresses("lo", None).unwrap();
        assert!(lo.contains(&"127.0.0.1".parse::<IpAddr>().unwrap()), "{lo:?}");
        assert!(interface_addresses("no-such-if0", None).unwrap().is_empty());
    }
}
