//! Building whole frames (Ethernet, optional VLAN tag, IPv4 or IPv6, then UDP, TCP or an ICMP
//! echo request) off the fast path: generator templates, acknowledgements, test packets.

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

/// The transport header a frame carries. TCP and ICMP take their ports from the frame: TCP
/// its source and destination port, an ICMP echo request its identifier (the source port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum L4 {
    #[default]
    Udp,
    /// A TCP segment with these flags (`TcpPacket` bits: FIN 0x01, SYN 0x02, RST 0x04,
    /// PSH 0x08, ACK 0x10, URG 0x20), no options, a window of 65535.
    Tcp { flags: u8 },
    /// An ICMP (ICMPv6 over IPv6) echo request.
    IcmpEcho,
}

impl L4 {
    /// The header's length.
    pub const fn header_len(self) -> usize {
        match self {
            L4::Udp | L4::IcmpEcho => 8,
            L4::Tcp { .. } => 20,
        }
    }

    /// The IP protocol number (next header) for an IPv4 or IPv6 frame.
    pub const fn protocol(self, v6: bool) -> u8 {
        match self {
            L4::Udp => IpProtocol::UDP,
            L4::Tcp { .. } => IpProtocol::TCP,
            L4::IcmpEcho if v6 => IpProtocol::ICMPV6,
            L4::IcmpEcho => IpProtocol::ICMP,
        }
    }

    /// Offset of the checksum inside the header.
    const fn checksum_offset(self) -> usize {
        match self {
            L4::Udp => 6,
            L4::Tcp { .. } => 16,
            L4::IcmpEcho => 2,
        }
    }

    /// Recompute the checksum of `segment` (the header and its payload) between `src` and
    /// `dst`, after its payload changed. UDP over IPv4 may carry none (zero).
    pub fn fill_checksum(self, src: IpAddr, dst: IpAddr, segment: &mut [u8]) {
        let at = self.checksum_offset();
        if segment.len() < at + 2 {
            return;
        }
        segment[at..at + 2].copy_from_slice(&[0, 0]);
        let sum = match (self, src, dst) {
            (L4::IcmpEcho, IpAddr::V4(_), IpAddr::V4(_)) => {
                super::checksum::internet_checksum(segment)
            }
            (_, IpAddr::V4(s), IpAddr::V4(d)) => {
                let proto = self.protocol(false);
                finish(
                    pseudo_header_sum(&s.octets(), &d.octets(), proto, segment.len() as u32),
                    segment,
                )
            }
            (_, IpAddr::V6(s), IpAddr::V6(d)) => {
                let proto = self.protocol(true);
                finish(
                    pseudo_header_sum(&s.octets(), &d.octets(), proto, segment.len() as u32),
                    segment,
                )
            }
            _ => return,
        };
        // UDP sends a computed zero as 0xffff (RFC 768); the others send it as it is.
        let sum = if self == L4::Udp && sum == 0 { 0xffff } else { sum };
        segment[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }
}

fn finish(mut c: super::Checksum, segment: &[u8]) -> u16 {
    c.add_bytes(segment).finish()
}

impl UdpFrame {
    /// Bytes of headers in front of the UDP payload.
    pub fn header_len(&self) -> usize {
        self.header_len_with(L4::Udp)
    }

    /// Bytes of headers in front of the payload, with `l4` as the transport header.
    pub fn header_len_with(&self, l4: L4) -> usize {
        let l3 = if self.src_ip.is_ipv4() { 20 } else { 40 };
        14 + if self.vlan.is_some() { 4 } else { 0 } + l3 + l4.header_len()
    }

    /// Write the frame with `payload` into `buf`; returns the frame length. The UDP checksum is
    /// computed (IPv6 requires it; for IPv4 it lets kernel receivers accept the frame).
    pub fn emit(&self, payload: &[u8], buf: &mut [u8]) -> Result<usize, UdpFrameError> {
        self.emit_with(L4::Udp, payload, buf)
    }

    /// Write the frame with `l4` as its transport header (same addresses and ports) and
    /// `payload`; returns the frame length. Every checksum is computed.
    pub fn emit_with(
        &self,
        l4: L4,
        payload: &[u8],
        buf: &mut [u8],
    ) -> Result<usize, UdpFrameError> {
        let need = self.header_len_with(l4) + payload.len();
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
        let v6 = self.src_ip.is_ipv6();
        let (proto, udp_len) = (l4.protocol(v6), l4.header_len() + payload.len());
        let at = match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                buf[l3 - 2..l3].copy_from_slice(&EtherType::IPV4.to_be_bytes());
                let mut ip = Ipv4Packet::new_unchecked(&mut buf[l3..]);
                ip.set_version_and_header_len(20);
                ip.set_dscp_ecn(0);
                ip.set_total_len((20 + udp_len) as u16);
                ip.set_ident(0);
                ip.set_flags_frag(0x4000); // don't fragment
                ip.set_ttl(64);
                ip.set_protocol(proto);
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
                ip.set_next_header(proto);
                ip.set_hop_limit(64);
                ip.set_src_addr(s);
                ip.set_dst_addr(d);
                l3 + 40
            }
            _ => return Err(UdpFrameError::MixedIpVersions),
        };
        let header = &mut buf[at..at + l4.header_len()];
        header.fill(0);
        match l4 {
            L4::Udp => {
                let mut udp = UdpPacket::new_unchecked(&mut *header);
                udp.set_src_port(self.src_port);
                udp.set_dst_port(self.dst_port);
                udp.set_len(udp_len as u16);
            }
            L4::Tcp { flags } => {
                header[0..2].copy_from_slice(&self.src_port.to_be_bytes());
                header[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
                header[4..8].copy_from_slice(&1u32.to_be_bytes()); // sequence number
                header[12] = 5 << 4; // 20-byte header, no options
                header[13] = flags;
                header[14..16].copy_from_slice(&u16::MAX.to_be_bytes()); // window
            }
            L4::IcmpEcho => {
                header[0] = if v6 { 128 } else { 8 }; // echo request
                header[4..6].copy_from_slice(&self.src_port.to_be_bytes()); // identifier
                header[6..8].copy_from_slice(&1u16.to_be_bytes()); // sequence number
            }
        }
        buf[at + l4.header_len()..].copy_from_slice(payload);
        l4.fill_checksum(self.src_ip, self.dst_ip, &mut buf[at..]);
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

    /// What a receiver checks: the checksum over the segment at `at..n` (with the pseudo header
    /// where the protocol has one) sums to zero.
    fn checksum_holds(frame: &[u8], at: usize, n: usize, l4: L4, v6: bool) -> bool {
        let seg = &frame[at..n];
        if l4 == L4::IcmpEcho && !v6 {
            return internet_checksum(seg) == 0;
        }
        let (s, d) =
            if v6 { (&frame[22..38], &frame[38..54]) } else { (&frame[26..30], &frame[30..34]) };
        pseudo_header_sum(s, d, l4.protocol(v6), seg.len() as u32).add_bytes(seg).finish() == 0
    }

    #[test]
    fn tcp_and_icmp_frames_carry_valid_checksums_also_after_the_payload_changed() {
        for v6 in [false, true] {
            for l4 in [L4::Udp, L4::Tcp { flags: 0x02 }, L4::IcmpEcho] {
                let f = spec(v6);
                let mut buf = [0u8; 128];
                let n = f.emit_with(l4, b"payload!", &mut buf).unwrap();
                let at = f.header_len_with(l4) - l4.header_len();
                assert_eq!(n, at + l4.header_len() + 8);
                assert_eq!(buf[if v6 { 20 } else { 23 }], l4.protocol(v6));
                assert!(checksum_holds(&buf, at, n, l4, v6), "{l4:?} v6={v6}");
                buf[n - 1] ^= 0x5a;
                assert!(!checksum_holds(&buf, at, n, l4, v6), "{l4:?} v6={v6}");
                l4.fill_checksum(f.src_ip, f.dst_ip, &mut buf[at..n]);
                assert!(checksum_holds(&buf, at, n, l4, v6), "{l4:?} v6={v6} refilled");
            }
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
