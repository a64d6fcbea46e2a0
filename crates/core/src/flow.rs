//! Flow keys: what identifies a flow (addresses, ports, protocol, VLAN), extracted from a frame
//! in one pass that also records layer offsets in the packet's metadata, and a fast hash of it
//! used for software RSS and the flow tables.

use crate::packet::{Layers, Meta};
use crate::wire::{
    EtherType, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket, VlanTag,
};
use core::net::IpAddr;

/// The identity of a flow. IPv4 addresses occupy the first 4 bytes of `src`/`dst`. For non-IP
/// frames, `src`/`dst` hold the MAC addresses and `src_port` the EtherType.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[repr(C, align(8))]
pub struct FlowKey {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    /// 4, 6, or 0 for non-IP.
    pub ip_version: u8,
    /// Outer VLAN id, 0 if untagged.
    pub vlan: u16,
}

impl FlowKey {
    pub fn from_ips(src: IpAddr, dst: IpAddr, proto: u8, src_port: u16, dst_port: u16) -> Self {
        let mut k = FlowKey { proto, src_port, dst_port, ..Default::default() };
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                k.ip_version = 4;
                k.src[..4].copy_from_slice(&s.octets());
                k.dst[..4].copy_from_slice(&d.octets());
            }
            (s, d) => {
                k.ip_version = 6;
                k.src = to_v6(s);
                k.dst = to_v6(d);
            }
        }
        k
    }

    pub fn src_ip(&self) -> Option<IpAddr> {
        ip_of(self.ip_version, &self.src)
    }

    pub fn dst_ip(&self) -> Option<IpAddr> {
        ip_of(self.ip_version, &self.dst)
    }

    #[inline(always)]
    fn words(&self) -> [u64; 5] {
        let w = |b: &[u8]| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        let tail = ((self.src_port as u64) << 48)
            | ((self.dst_port as u64) << 32)
            | ((self.proto as u64) << 24)
            | ((self.ip_version as u64) << 16)
            | self.vlan as u64;
        [w(&self.src[..8]), w(&self.src[8..]), w(&self.dst[..8]), w(&self.dst[8..]), tail]
    }

    /// A 64-bit hash of the key: each word multiplied on its own (so the five multiplies run
    /// side by side; a chain of them cost about 40 cycles of latency per packet), rotated
    /// apart, summed, then the murmur3 finaliser. Each word's mix is a bijection, so no word
    /// can cancel another's bits by taking a special value. Stable across runs and machines,
    /// so RSS spreads the same flows the same way every time.
    #[inline(always)]
    pub fn hash64(&self) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        const SEEDS: [u64; 5] = [
            0x243f_6a88_85a3_08d3,
            0x1319_8a2e_0370_7344,
            0xa409_3822_299f_31d0,
            0x082e_fa98_ec4e_6c89,
            0x4528_21e6_38d0_1377,
        ];
        let [a, b, c, d, e] = self.words();
        let m = |w: u64, i: usize| (w ^ SEEDS[i]).wrapping_mul(K);
        let h = m(a, 0)
            .wrapping_add(m(b, 1).rotate_left(13))
            .wrapping_add(m(c, 2).rotate_left(29))
            .wrapping_add(m(d, 3).rotate_left(43))
            .wrapping_add(m(e, 4).rotate_left(53));
        fmix64(h)
    }

    /// The 32-bit flow hash stored in `Meta::flow_hash`.
    #[inline(always)]
    pub fn hash32(&self) -> u32 {
        (self.hash64() >> 32) as u32
    }

    /// Apply a mask field by field (bitwise AND).
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        let mut k = *self;
        for i in 0..16 {
            k.src[i] &= mask.src[i];
            k.dst[i] &= mask.dst[i];
        }
        k.src_port &= mask.src_port;
        k.dst_port &= mask.dst_port;
        k.proto &= mask.proto;
        k.ip_version &= mask.ip_version;
        k.vlan &= mask.vlan;
        k
    }
}

fn to_v6(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn ip_of(version: u8, b: &[u8; 16]) -> Option<IpAddr> {
    match version {
        4 => Some(IpAddr::from([b[0], b[1], b[2], b[3]])),
        6 => Some(IpAddr::from(*b)),
        _ => None,
    }
}

#[inline(always)]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

impl core::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

impl core::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let proto = match self.proto {
            IpProtocol::TCP => "tcp".to_string(),
            IpProtocol::UDP => "udp".to_string(),
            IpProtocol::ICMP => "icmp".to_string(),
            p => format!("proto {p}"),
        };
        match (self.src_ip(), self.dst_ip()) {
            (Some(s), Some(d)) => {
                write!(f, "{proto} {s}:{} -> {d}:{}", self.src_port, self.dst_port)?;
            }
            _ => write!(f, "non-ip ethertype 0x{:04x}", self.src_port)?,
        }
        if self.vlan != 0 {
            write!(f, " vlan {}", self.vlan)?;
        }
        Ok(())
    }
}

/// Most IPv6 extension headers the classifier walks before giving up on finding ports.
const MAX_IPV6_EXT: usize = 4;

/// Parse `frame` once: fill `meta`'s layer flags and offsets and its flow hash, and return the
/// flow key. Never panics: truncated or malformed layers just end the walk, and whatever was
/// understood so far is the key (a runt frame gets an all-zero key).
#[inline]
pub fn classify(frame: &[u8], meta: &mut Meta) -> FlowKey {
    let key = classify_inner(frame, meta);
    meta.flow_hash = key.hash32();
    key
}

#[inline(always)]
fn classify_inner(frame: &[u8], meta: &mut Meta) -> FlowKey {
    let mut key = FlowKey::default();
    meta.layers = 0;
    meta.l3_off = 0;
    meta.l4_off = 0;
    meta.payload_off = 0;
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return key;
    };
    meta.layers = Layers::ETHERNET;
    let mut ethertype = eth.ethertype();
    let mut off = EthernetFrame::<&[u8]>::HEADER_LEN;
    for _ in 0..2 {
        if ethertype != EtherType::VLAN && ethertype != EtherType::QINQ {
            break;
        }
        let Ok(tag) = VlanTag::new_checked(&frame[off..]) else {
            return key;
        };
        if meta.layers & Layers::VLAN == 0 {
            key.vlan = tag.vlan_id();
        }
        meta.layers |= Layers::VLAN;
        ethertype = tag.inner_ethertype();
        off += VlanTag::<&[u8]>::LEN;
    }
    let l3 = &frame[off..];
    let (proto, l4_off) = match ethertype {
        EtherType::IPV4 => {
            let Ok(ip) = Ipv4Packet::new_checked(l3) else {
                return non_ip(key, &eth, ethertype);
            };
            meta.layers |= Layers::IPV4;
            meta.l3_off = off as u16;
            key.ip_version = 4;
            key.src[..4].copy_from_slice(&ip.src_bytes());
            key.dst[..4].copy_from_slice(&ip.dst_bytes());
            key.proto = ip.protocol();
            if ip.is_later_fragment() {
                meta.layers |= Layers::FRAGMENT;
                return key;
            }
            if ip.more_fragments() {
                meta.layers |= Layers::FRAGMENT;
            }
            // Transport bytes end where the IP datagram ends, not at the frame's padding.
            (ip.protocol(), (off + ip.header_len(), off + ip.total_len() as usize))
        }
        EtherType::IPV6 => {
            let Ok(ip) = Ipv6Packet::new_checked(l3) else {
                return non_ip(key, &eth, ethertype);
            };
            meta.layers |= Layers::IPV6;
            meta.l3_off = off as u16;
            key.ip_version = 6;
            key.src = ip.src_bytes();
            key.dst = ip.dst_bytes();
            let end = off + 40 + ip.payload_len() as usize;
            let mut next = ip.next_header();
            let mut at = off + 40;
            let mut walked = 0;
            loop {
                match next {
                    0 | 43 | 60 if walked < MAX_IPV6_EXT => {
                        if at + 8 > end {
                            key.proto = next;
                            return key;
                        }
                        let len = (frame[at + 1] as usize + 1) * 8;
                        next = frame[at];
                        at += len;
                        walked += 1;
                    }
                    IpProtocol::IPV6_FRAGMENT if walked < MAX_IPV6_EXT => {
                        if at + 8 > end {
                            key.proto = next;
                            return key;
                        }
                        meta.layers |= Layers::FRAGMENT;
                        let frag_off = u16::from_be_bytes([frame[at + 2], frame[at + 3]]) & !7;
                        next = frame[at];
                        at += 8;
                        walked += 1;
                        if frag_off != 0 {
                            key.proto = next;
                            return key;
                        }
                    }
                    _ => break,
                }
            }
            key.proto = next;
            if at > end {
                return key;
            }
            (next, (at, end))
        }
        other => return non_ip(key, &eth, other),
    };
    let (l4_start, l4_end) = l4_off;
    let l4 = &frame[l4_start..l4_end];
    match proto {
        IpProtocol::UDP => {
            if let Ok(udp) = UdpPacket::new_checked(l4) {
                meta.layers |= Layers::UDP;
                meta.l4_off = l4_start as u16;
                meta.payload_off = (l4_start + UdpPacket::<&[u8]>::HEADER_LEN) as u16;
                key.src_port = udp.src_port();
                key.dst_port = udp.dst_port();
            }
        }
        IpProtocol::TCP => {
            if let Ok(tcp) = TcpPacket::new_checked(l4) {
                meta.layers |= Layers::TCP;
                meta.l4_off = l4_start as u16;
                meta.payload_off = (l4_start + tcp.header_len()) as u16;
                key.src_port = tcp.src_port();
                key.dst_port = tcp.dst_port();
            }
        }
        _ => {
            meta.l4_off = l4_start as u16;
        }
    }
    key
}

fn non_ip(mut key: FlowKey, eth: &EthernetFrame<&[u8]>, ethertype: u16) -> FlowKey {
    key.src[..6].copy_from_slice(&eth.src_addr().0);
    key.dst[..6].copy_from_slice(&eth.dst_addr().0);
    key.src_port = ethertype;
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EthernetAddress, UdpFrame};

    fn udp_frame(src: &str, dst: &str, vlan: Option<u16>) -> Vec<u8> {
        let f = UdpFrame {
            src_mac: EthernetAddress::local(1),
            dst_mac: EthernetAddress::local(2),
            vlan,
            src_ip: src.parse().unwrap(),
            dst_ip: dst.parse().unwrap(),
            src_port: 1234,
            dst_port: 5678,
        };
        let mut buf = vec![0u8; 200];
        let n = f.emit(&[0xaa; 10], &mut buf).unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn ipv4_udp_with_vlan() {
        let frame = udp_frame("10.0.0.1", "10.0.0.2", Some(42));
        let mut m = Meta::default();
        let k = classify(&frame, &mut m);
        assert_eq!(k.to_string(), "udp 10.0.0.1:1234 -> 10.0.0.2:5678 vlan 42");
        assert_eq!(m.layers, Layers::ETHERNET | Layers::VLAN | Layers::IPV4 | Layers::UDP);
        assert_eq!((m.l3_off, m.l4_off, m.payload_off), (18, 38, 46));
        assert_eq!(m.flow_hash, k.hash32());
    }

    #[test]
    fn ipv6_udp() {
        let frame = udp_frame("fd00::1", "fd00::2", None);
        let mut m = Meta::default();
        let k = classify(&frame, &mut m);
        assert_eq!(k.to_string(), "udp fd00::1:1234 -> fd00::2:5678");
        assert_eq!(m.payload_off, 14 + 40 + 8);
    }

    #[test]
    fn ipv6_fragment_header_is_walked() {
        let mut frame = udp_frame("fd00::1", "fd00::2", None);
        // Insert a fragment header (first fragment, offset 0) before UDP.
        let frag = [17u8, 0, 0, 0, 0, 0, 0, 1];
        frame.splice(54..54, frag);
        frame[20] = 44; // next header = fragment
        let plen = u16::from_be_bytes([frame[18], frame[19]]) + 8;
        frame[18..20].copy_from_slice(&plen.to_be_bytes());
        let mut m = Meta::default();
        let k = classify(&frame, &mut m);
        assert_eq!(k.dst_port, 5678);
        assert!(m.layers & Layers::FRAGMENT != 0);
        // A later fragment has no ports.
        frame[56..58].copy_from_slice(&(8u16 << 3).to_be_bytes());
        let k = classify(&frame, &mut m);
        assert_eq!((k.src_port, k.dst_port, k.proto), (0, 0, 17));
    }

    #[test]
    fn hashes_spread_flows_that_differ_in_one_field() {
        // RSS takes the top bits of hash32 (multiply-shift); flows differing only in the last
        // address byte, or only in the source port, must fill 16 queues evenly.
        let spread = |keys: Vec<FlowKey>| {
            let mut q = [0u32; 16];
            for k in &keys {
                q[((k.hash32() as u64 * 16) >> 32) as usize] += 1;
            }
            let fair = keys.len() as u32 / 16;
            assert!(q.iter().all(|&n| n > fair * 3 / 4 && n < fair * 5 / 4), "{q:?}");
            let distinct: std::collections::HashSet<_> = keys.iter().map(|k| k.hash64()).collect();
            assert_eq!(distinct.len(), keys.len());
        };
        let ip = |i: u32| IpAddr::from((0x0a00_0000u32 + i).to_be_bytes());
        let v4 = |i: u32| FlowKey::from_ips(ip(1), ip(i), 17, 1234, 80);
        spread((0..4096).map(v4).collect());
        spread((0..4096).map(|p| FlowKey::from_ips(ip(1), ip(2), 6, p as u16, 443)).collect());
        let v6 = |i: u16| {
            let a: IpAddr = format!("fd00::{i:x}").parse().unwrap();
            FlowKey::from_ips("fd00::1".parse().unwrap(), a, 17, 1, 2)
        };
        spread((0..4096).map(v6).collect());
    }

    #[test]
    fn different_flows_hash_differently() {
        let mut m = Meta::default();
        let a = classify(&udp_frame("10.0.0.1", "10.0.0.2", None), &mut m);
        let b = classify(&udp_frame("10.0.0.1", "10.0.0.3", None), &mut m);
        assert_ne!(a.hash64(), b.hash64());
        assert_eq!(a.masked(&FlowKey::default()), FlowKey::default());
    }

    #[test]
    fn every_truncation_of_a_frame_is_safe() {
        for frame in
            [udp_frame("10.0.0.1", "10.0.0.2", Some(7)), udp_frame("fd00::1", "fd00::2", None)]
        {
            for n in 0..=frame.len() {
                let mut m = Meta::default();
                let _ = classify(&frame[..n], &mut m);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn classify_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..1600)) {
            let mut m = Meta::default();
            let _ = classify(&bytes, &mut m);
            proptest::prop_assert!(m.payload_off as usize <= bytes.len());
        }
    }
}
