//! Where the shim sits in an IP packet (`docs/wasp.md` §1, point 5): behind IPv4 protocol /
//! IPv6 next header 253, or as the first bytes of a UDP payload on a configured port.
//!
//! Only finds offsets; never changes the packet. Fragments are not WASP packets (the shim is
//! read whole or not at all). IPv6 extension headers before the shim are walked, at most
//! [`MAX_IPV6_EXTENSIONS`] of them, so a chain of extension headers costs bounded work.

use crate::wire::IP_PROTOCOL;

/// IPv6 extension headers walked before giving up.
pub const MAX_IPV6_EXTENSIONS: usize = 4;
const UDP: u8 = 17;
const UDP_HEADER_LEN: usize = 8;

/// How the shim is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carriage {
    /// Directly behind the IP header (protocol 253).
    Ip,
    /// As the start of a UDP payload; a node that rewrites the shim must fix the UDP checksum.
    Udp,
}

/// Where the shim is: from `shim_offset` to at most `end` (both from the start of the IP
/// header), and its carriage. `end` is where the IP datagram (or the UDP datagram) ends as
/// its own length fields say: bytes past it (Ethernet padding, a trailer) are never part of a
/// shim, and a program's header bank must not show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub shim_offset: usize,
    pub end: usize,
    pub carriage: Carriage,
}

/// Finds the shim in `ip` (bytes from the IP header on). `udp_port` enables the UDP carriage.
/// `shim_offset <= end <= ip.len()` (the shim itself is checked by `WaspPacket`, given
/// `&ip[shim_offset..end]`).
pub fn locate(ip: &[u8], udp_port: Option<u16>) -> Option<Located> {
    locate_unbounded(ip, udp_port)
        .filter(|found| found.shim_offset <= found.end && found.end <= ip.len())
}

fn locate_unbounded(ip: &[u8], udp_port: Option<u16>) -> Option<Located> {
    let (protocol, offset, end) = match ip.first()? >> 4 {
        4 => ipv4_payload(ip)?,
        6 => ipv6_payload(ip)?,
        _ => return None,
    };
    match protocol {
        IP_PROTOCOL => Some(Located { shim_offset: offset, end, carriage: Carriage::Ip }),
        UDP => {
            let port = udp_port?;
            let udp = ip.get(offset..offset + UDP_HEADER_LEN)?;
            let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
            if udp_len < UDP_HEADER_LEN || udp_len > end.checked_sub(offset)? {
                return None;
            }
            (u16::from_be_bytes([udp[2], udp[3]]) == port).then_some(Located {
                shim_offset: offset + UDP_HEADER_LEN,
                end: offset + udp_len,
                carriage: Carriage::Udp,
            })
        }
        _ => None,
    }
}

/// (protocol, payload offset, datagram end) of an IPv4 datagram that is not a fragment.
fn ipv4_payload(ip: &[u8]) -> Option<(u8, usize, usize)> {
    let header_len = usize::from(ip.first()? & 0x0f) * 4;
    if header_len < 20 || ip.len() < header_len {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if total < header_len || total > ip.len() {
        return None;
    }
    let more_fragments = ip[6] & 0x20 != 0;
    let fragment_offset = u16::from_be_bytes([ip[6] & 0x1f, ip[7]]);
    if more_fragments || fragment_offset != 0 {
        return None;
    }
    Some((ip[9], header_len, total))
}

/// (protocol, payload offset, datagram end) of an IPv6 datagram, extension headers walked
/// within the datagram. A jumbogram (payload length 0) is not a WASP packet.
fn ipv6_payload(ip: &[u8]) -> Option<(u8, usize, usize)> {
    const HOP_BY_HOP: u8 = 0;
    const ROUTING: u8 = 43;
    const DESTINATION: u8 = 60;
    let payload_len = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
    let end = 40 + payload_len;
    if payload_len == 0 || end > ip.len() {
        return None;
    }
    let ip = &ip[..end];
    let mut next = ip[6];
    let mut offset = 40;
    for _ in 0..MAX_IPV6_EXTENSIONS {
        if !matches!(next, HOP_BY_HOP | ROUTING | DESTINATION) {
            return Some((next, offset, end));
        }
        let extension = ip.get(offset..offset + 2)?;
        next = extension[0];
        offset += (usize::from(extension[1]) + 1) * 8;
    }
    (!matches!(next, HOP_BY_HOP | ROUTING | DESTINATION)).then_some((next, offset, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(protocol: u8, flags_fragment: [u8; 2], tail: &[u8]) -> Vec<u8> {
        let total = (20 + tail.len()) as u16;
        let [hi, lo] = total.to_be_bytes();
        let mut p =
            vec![0x45, 0, hi, lo, 0, 0, flags_fragment[0], flags_fragment[1], 64, protocol, 0, 0];
        p.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        p.extend_from_slice(tail);
        p
    }

    #[test]
    fn finds_the_shim_behind_ipv4_and_in_udp() {
        let ip = ipv4(253, [0x40, 0], &[1; 16]);
        assert_eq!(
            locate(&ip, None),
            Some(Located { shim_offset: 20, end: 36, carriage: Carriage::Ip })
        );
        let udp = ipv4(17, [0, 0], &[0x30, 0x39, 0x24, 0x3d, 0, 9, 0, 0, 1]);
        assert_eq!(
            locate(&udp, Some(9277)),
            Some(Located { shim_offset: 28, end: 29, carriage: Carriage::Udp })
        );
        assert_eq!(locate(&udp, Some(9278)), None);
        assert_eq!(locate(&udp, None), None);
        assert_eq!(locate(&ipv4(6, [0, 0], &[0; 20]), Some(9277)), None);
    }

    /// Bytes past the datagram's own length (Ethernet padding) are never a shim, and a UDP
    /// length past the IP datagram is refused.
    #[test]
    fn the_datagram_ends_where_its_length_says() {
        let mut padded = ipv4(253, [0, 0], &[1; 16]);
        padded[2..4].copy_from_slice(&20u16.to_be_bytes());
        let found = locate(&padded, None).unwrap();
        assert_eq!((found.shim_offset, found.end), (20, 20), "the padding is not the shim");
        let mut long = ipv4(253, [0, 0], &[1; 16]);
        long[2..4].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(locate(&long, None), None, "total length past the bytes");
        let udp = ipv4(17, [0, 0], &[0x30, 0x39, 0x24, 0x3d, 0, 40, 0, 0, 1]);
        assert_eq!(locate(&udp, Some(9277)), None, "UDP length past the datagram");
        let mut ip6 = vec![0x60, 0, 0, 0, 0, 0, 253, 64];
        ip6.extend_from_slice(&[0; 48]);
        assert_eq!(locate(&ip6, None), None, "payload length 0 (a jumbogram) is not WASP");
    }

    #[test]
    fn fragments_and_short_headers_are_not_wasp() {
        assert_eq!(locate(&ipv4(253, [0x20, 0], &[]), None), None, "more fragments");
        assert_eq!(locate(&ipv4(253, [0, 1], &[]), None), None, "offset");
        assert_eq!(locate(&[0x45, 0, 0], None), None);
        assert_eq!(locate(&[0x44; 30], None), None, "IHL below 5");
        assert_eq!(locate(&[], None), None);
    }

    #[test]
    fn walks_a_bounded_number_of_ipv6_extension_headers() {
        let mut ip = vec![0x60, 0, 0, 0, 0, 16, 0, 64];
        ip.extend_from_slice(&[0; 32]);
        ip.extend_from_slice(&[253, 0, 0, 0, 0, 0, 0, 0]); // hop-by-hop, 8 bytes, then 253
        ip.extend_from_slice(&[0; 8]); // the rest of the payload length: where the shim starts
        assert_eq!(
            locate(&ip, None),
            Some(Located { shim_offset: 48, end: 56, carriage: Carriage::Ip })
        );
        let mut chain = vec![0x60, 0, 0, 0, 0, 32, 60, 64];
        chain.extend_from_slice(&[0; 32]);
        for _ in 0..MAX_IPV6_EXTENSIONS {
            chain.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
        }
        assert_eq!(locate(&chain, None), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_stays_inside(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..120)) {
            if let Some(found) = locate(&bytes, Some(9277)) {
                proptest::prop_assert!(found.shim_offset <= found.end && found.end <= bytes.len());
            }
        }
    }
}
