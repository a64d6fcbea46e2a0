//! Building whole UDP frames (Ethernet, optional VLAN tag, IPv4 or IPv6, UDP) off the fast path:
//! generator templates, acknowledgements, test packets.

use super::checksum::pseudo_header_sum;
use super::{
    EtherType, EthernetAddress, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet, UdpPacket,
};
use core::net::IpAddr;

/// Addresses and ports of a UDP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrame {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub vlan: Option<u16>,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UdpFrameError {
    #[error("source and destination addresses are of different IP versions")]
    MixedIpVersions,
    #[error("frame of {need} bytes does not fit a buffer of {have}")]
    TooLong { need: usize, have: usize },
}

impl UdpFrame {
    /// Bytes of headers in front of the UDP payload.
    pub fn header_len(&self) -> usize {
        let l3 = if self.src_ip.is_ipv4() { 20 } else { 40 };
        14 + if self.vlan.is_some() { 4 } else { 0 } + l3 + 8
    }

    /// Write the frame with `payload` into `buf`; returns the frame length. The UDP checksum is
    /// computed (IPv6 requires it; for IPv4 it lets kernel receivers accept the frame).
    pub fn emit(&self, payload: &[u8], buf: &mut [u8]) -> Result<usize, UdpFrameError> {
        let need = self.header_len() + payload.len();
        if need > buf.len() {
            return Err(UdpFrameError::TooLong { need, have: buf.len() });
        }
        if need > u16::MAX as usize {
            return Err(UdpFrameError::TooLong { need, have: u16::MAX as usize });
        }
        let buf = &mut buf[..need];
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.set_dst_addr(self.dst_mac);
        eth.set_src_addr(self.src_mac);
        let mut l3 = 14;
        if let Some(vid) = self.vlan {
            eth.set_ethertype(EtherType::VLAN);
            buf[14..16].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
            l3 = 18;
        }
        let udp_len = 8 + payload.len();
        let l4 = match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                buf[l3 - 2..l3].copy_from_slice(&EtherType::IPV4.to_be_bytes());
                let mut ip = Ipv4Packet::new_unchecked(&mut buf[l3..]);
                ip.set_version_and_header_len(20);
                ip.set_dscp_ecn(0);
                ip.set_total_len((20 + udp_len) as u16);
                ip.set_ident(0);
                ip.set_flags_frag(0x4000); // don't fragment
                ip.set_ttl(64);
                ip.set_protocol(IpProtocol::UDP);
                ip.set_src_addr(s);
                ip.set_dst_addr(d);
                ip.fill_checksum();
                l3 + 20
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                buf[l3 - 2..l3].copy_from_slice(&EtherType::IPV6.to_be_bytes());
                let mut ip = Ipv6Packet::new_unchecked(&mut buf[l3..]);
                ip.set_version_class_flow(0, 0);
                ip.set_payload_len(udp_len as u16);
                ip.set_next_header(IpProtocol::UDP);
                ip.set_hop_limit(64);
                ip.set_src_addr(s);
                ip.set_dst_addr(d);
                l3 + 40
            }
            _ => return Err(UdpFrameError::MixedIpVersions),
        };
        let mut udp = UdpPacket::new_unchecked(&mut buf[l4..]);
        udp.set_src_port(self.src_port);
        udp.set_dst_port(self.dst_port);
        udp.set_len(udp_len as u16);
        udp.set_checksum(0);
        buf[l4 + 8..].copy_from_slice(payload);
        let csum = udp_checksum(self.src_ip, self.dst_ip, &buf[l4..]);
        buf[l4 + 6..l4 + 8].copy_from_slice(&csum.to_be_bytes());
        Ok(need)
    }
}

/// UDP checksum over a datagram whose checksum field is zero. A computed zero is sent as
/// 0xffff (RFC 768).
pub fn udp_checksum(src: IpAddr, dst: IpAddr, datagram: &[u8]) -> u16 {
    let mut c = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            pseudo_header_sum(&s.octets(), &d.octets(), IpProtocol::UDP, datagram.len() as u32)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            pseudo_header_sum(&s.octets(), &d.octets(), IpProtocol::UDP, datagram.len() as u32)
        }
        _ => return 0,
    };
    match c.add_bytes(datagram).finish() {
        0 => 0xffff,
        v => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::internet_checksum;

    fn spec(v6: bool) -> UdpFrame {
        let (s, d): (IpAddr, IpAddr) = if v6 {
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
        } else {
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
        };
        UdpFrame {
            src_mac: EthernetAddress::local(1),
            dst_mac: EthernetAddress::local(2),
            vlan: None,
            src_ip: s,
            dst_ip: d,
            src_port: 1000,
            dst_port: 2000,
        }
    }

    #[test]
    fn checksums_verify() {
        for v6 in [false, true] {
            let mut buf = [0u8; 128];
            let f = spec(v6);
            let n = f.emit(b"hello", &mut buf).unwrap();
            assert_eq!(n, f.header_len() + 5);
            let l4 = f.header_len() - 8;
            // Summing the datagram including its checksum with the pseudo header gives 0.
            let mut c = if v6 {
                pseudo_header_sum(&buf[22..38], &buf[38..54], 17, 13)
            } else {
                assert_eq!(internet_checksum(&buf[14..34]), 0);
                pseudo_header_sum(&buf[26..30], &buf[30..34], 17, 13)
            };
            assert_eq!(c.add_bytes(&buf[l4..n]).finish(), 0);
        }
    }

    #[test]
    fn refuses_small_buffer_and_mixed_versions() {
        let mut buf = [0u8; 40];
        assert!(matches!(spec(false).emit(b"x", &mut buf), Err(UdpFrameError::TooLong { .. })));
        let mut f = spec(false);
        f.dst_ip = "fd00::2".parse().unwrap();
        let mut buf = [0u8; 128];
        assert_eq!(f.emit(b"", &mut buf), Err(UdpFrameError::MixedIpVersions));
    }
}
