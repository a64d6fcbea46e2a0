//! Frames and objects shared by the integration tests.
#![allow(dead_code)]

use hotplane_core::wire::{internet_checksum, udp_checksum};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

pub fn example(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/ebpf").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// Ethernet + IPv4 + UDP/TCP (protocol 17 / 6) with valid checksums, `payload` bytes of data.
pub fn ipv4(
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    ttl: u8,
    payload: usize,
) -> Vec<u8> {
    let l4_len = if proto == 6 { 20 } else { 8 } + payload;
    let mut f = Vec::new();
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&MAC_A);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + l4_len) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, ttl, proto, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = internet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut l4 = vec![0u8; l4_len];
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    for (i, b) in l4.iter_mut().enumerate().skip(if proto == 6 { 20 } else { 8 }) {
        *b = i as u8;
    }
    if proto == 17 {
        l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
    } else {
        l4[12] = 5 << 4;
    }
    let (s, d) = (IpAddr::V4(Ipv4Addr::from(src)), IpAddr::V4(Ipv4Addr::from(dst)));
    let c = l4_checksum(proto, s, d, &l4);
    let at = if proto == 6 { 16 } else { 6 };
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&l4);
    f
}

/// TCP or UDP checksum over the pseudo-header and `seg` (whose checksum field is zero).
pub fn l4_checksum(proto: u8, src: IpAddr, dst: IpAddr, seg: &[u8]) -> u16 {
    if proto == 17 {
        return udp_checksum(src, dst, seg);
    }
    let (IpAddr::V4(s), IpAddr::V4(d)) = (src, dst) else { unreachable!() };
    let mut buf = Vec::new();
    buf.extend_from_slice(&s.octets());
    buf.extend_from_slice(&d.octets());
    buf.extend_from_slice(&[0, proto]);
    buf.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    buf.extend_from_slice(seg);
    internet_checksum(&buf)
}

/// Whether the IPv4 header and TCP/UDP checksums of `f` are valid.
pub fn checksums_valid(f: &[u8]) -> bool {
    let ip = &f[14..34];
    if internet_checksum(ip) != 0 {
        return false;
    }
    let proto = ip[9];
    let src = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
    let dst = IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
    let mut seg = f[34..].to_vec();
    let at = if proto == 6 { 16 } else { 6 };
    let stored = u16::from_be_bytes([seg[at], seg[at + 1]]);
    seg[at] = 0;
    seg[at + 1] = 0;
    stored == l4_checksum(proto, src, dst, &seg)
}

/// The maps the fuzz generator's programs refer to (`lddw rX, map 0..3`).
pub fn gen_maps() -> Vec<hotplane_ebpf::program::MapSpec> {
    use hotplane_ebpf::maps::MapKind;
    let m = hotplane_ebpf::program::MapSpec::new;
    vec![
        m("array", MapKind::Array, 4, 16, 4),
        m("hash", MapKind::Hash, 8, 8, 8),
        m("percpu", MapKind::PerCpuArray, 4, 8, 2),
        m("lpm", MapKind::LpmTrie, 8, 4, 4),
    ]
}
