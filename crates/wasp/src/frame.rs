//! Building whole Ethernet frames around a shim, as an end-host sends them: behind an IP
//! header with protocol 253, or at the start of a UDP payload (`docs/wasp.md` §1, point 5).
//! For tests, the CLI's `run`, benchmarks and the demo; the data plane never builds frames.

use crate::wire::{WaspRepr, DEFAULT_UDP_PORT, IP_PROTOCOL};
use hotplane_core::wire::{
    EtherType, EthernetAddress, EthernetFrame, Ipv4Packet, Ipv6Packet, UdpFrame, UdpFrameError,
};
use std::net::IpAddr;

/// How an end-host sends its active packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Send {
    /// IP protocol 253; `next_header` of the shim names what follows it.
    Ip,
    /// UDP from `src_port` to `dst_port` (9277 by default), the shim first in the payload.
    Udp { src_port: u16, dst_port: u16 },
}

impl Default for Send {
    fn default() -> Self {
        Send::Udp { src_port: DEFAULT_UDP_PORT, dst_port: DEFAULT_UDP_PORT }
    }
}

/// Addresses and TTL of an active frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hosts {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub ttl: u8,
}

impl Default for Hosts {
    fn default() -> Self {
        Hosts {
            src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src_ip: IpAddr::from([10, 0, 0, 1]),
            dst_ip: IpAddr::from([10, 0, 0, 2]),
            ttl: 64,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("the shim: {0}")]
    Shim(#[from] crate::error::Reject),
    #[error(transparent)]
    Udp(#[from] UdpFrameError),
    #[error("a frame of {0} bytes is longer than IP allows")]
    TooLong(usize),
}

/// The frame: Ethernet, IPv4 or IPv6, the shim of `repr`, then `rest` (what the shim's
/// `next_header` names: a transport header and payload, or nothing).
pub fn active_frame(
    hosts: &Hosts,
    send: Send,
    repr: &WaspRepr,
    rest: &[u8],
) -> Result<Vec<u8>, FrameError> {
    let mut body = repr.to_bytes()?;
    body.extend_from_slice(rest);
    frame_around(hosts, send, &body)
}

/// The frame around `body`: a shim already emitted (and, for an admin packet, sealed) and what
/// follows it.
pub fn frame_around(hosts: &Hosts, send: Send, body: &[u8]) -> Result<Vec<u8>, FrameError> {
    match send {
        Send::Udp { src_port, dst_port } => {
            let udp = UdpFrame {
                src_mac: hosts.src_mac,
                dst_mac: hosts.dst_mac,
                vlan: None,
                src_ip: hosts.src_ip,
                dst_ip: hosts.dst_ip,
                src_port,
                dst_port,
            };
            let mut frame = vec![0u8; udp.header_len() + body.len()];
            let n = udp.emit(body, &mut frame)?;
            frame.truncate(n);
            set_ttl(&mut frame, hosts.ttl);
            Ok(frame)
        }
        Send::Ip => ip_frame(hosts, body),
    }
}

fn ip_frame(hosts: &Hosts, body: &[u8]) -> Result<Vec<u8>, FrameError> {
    let ip_len = if hosts.src_ip.is_ipv4() { 20 } else { 40 };
    let mut frame = vec![0u8; 14 + ip_len + body.len()];
    if frame.len() - 14 > usize::from(u16::MAX) {
        return Err(FrameError::TooLong(frame.len()));
    }
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    eth.set_dst_addr(hosts.dst_mac);
    eth.set_src_addr(hosts.src_mac);
    match (hosts.src_ip, hosts.dst_ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            eth.set_ethertype(EtherType::IPV4);
            let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
            ip.set_version_and_header_len(20);
            ip.set_dscp_ecn(0);
            ip.set_total_len((20 + body.len()) as u16);
            ip.set_ident(0);
            ip.set_flags_frag(0x4000);
            ip.set_ttl(hosts.ttl);
            ip.set_protocol(IP_PROTOCOL);
            ip.set_src_addr(s);
            ip.set_dst_addr(d);
            ip.fill_checksum();
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            eth.set_ethertype(EtherType::IPV6);
            let mut ip = Ipv6Packet::new_unchecked(&mut frame[14..]);
            ip.set_version_class_flow(0, 0);
            ip.set_payload_len(body.len() as u16);
            ip.set_next_header(IP_PROTOCOL);
            ip.set_hop_limit(hosts.ttl);
            ip.set_src_addr(s);
            ip.set_dst_addr(d);
        }
        _ => return Err(FrameError::Udp(UdpFrameError::MixedIpVersions)),
    }
    frame[14 + ip_len..].copy_from_slice(body);
    Ok(frame)
}

/// Sets the TTL (hop limit) of an untagged frame, refilling the IPv4 header checksum.
fn set_ttl(frame: &mut [u8], ttl: u8) {
    match frame.get(14).map(|b| b >> 4) {
        Some(4) => {
            let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
            ip.set_ttl(ttl);
            ip.fill_checksum();
        }
        Some(6) => Ipv6Packet::new_unchecked(&mut frame[14..]).set_hop_limit(ttl),
        _ => {}
    }
}
